"""The feature stage of every use case through the real ``hopsworks`` SDK (fake server).

``pipelines/feature.py`` runs against ``feature_store.login(backend="hopsworks")``; the SDK
creates each group over HTTP, validates with Great Expectations, writes Delta with its own
engine (to the fake cluster's HopsFS folder) and posts the commit. Small source samples.
"""

from __future__ import annotations

import json

import pytest
from deltalake import DeltaTable

from pipelines.feature import FeaturePipelineConfig, run
from feature_views import get_source

SMALL = {"adult": {"sample": 200}, "flights": {"sample": 300},
         "mnist": {"sample": 40}, "ccfraud": {"n_transactions": 1500}}


def run_feature_stage(project, use_case: str):
    """Run the feature stage of ``use_case`` with its small sample (shared by other modules)."""
    return run(project, FeaturePipelineConfig(use_case=use_case, **SMALL[use_case]))


@pytest.mark.parametrize("use_case", sorted(SMALL))
def test_feature_stage_writes_every_group_through_the_sdk(hops_cluster, use_case):
    cluster, project = hops_cluster
    server = cluster.server
    ref = run_feature_stage(project, use_case)

    specs = {s.name: s for s in get_source(use_case).FEATURE_GROUPS}
    assert {g.name for g in ref.feature_groups} == set(specs)
    for group_ref in ref.feature_groups:
        spec = specs[group_ref.name]
        (group,) = server.state.groups_named(group_ref.name)
        # tags reached the server as name/value entries, validated against the cluster schemas
        assert group.tags == {k: v for k, v in spec.tags.items()} | (
            {"fstrain_feature_tags": {f: dict(t) for f, t in spec.feature_tags.items()}}
            if spec.feature_tags else {})
        assert [f["name"] for f in group.body["features"] if f["primary"]] == list(spec.primary_key)
        # the SDK's Delta engine wrote the rows and posted the commit it read from the Delta log
        table = DeltaTable(str(server.state.hopsfs / group.body["location"].split("8020/")[1]))
        assert table.to_pyarrow_table().num_rows == group_ref.rows_inserted > 0
        assert group.commits[-1]["rowsInserted"] == group_ref.rows_inserted
        assert group_ref.commit == group.commits[-1]["commitTime"]


def test_tags_were_sent_as_name_value_entries(hops_cluster):
    """Regression: fstrain passed ``tags={name: value}``, which the SDK's Tag cannot take."""
    cluster, project = hops_cluster
    fs = project.get_feature_store()
    fg = fs.get_or_create_feature_group("tagged", 1, primary_key=["id"],
                                        tags={"source": "unit", "pii": False})
    import pandas as pd

    fg.insert(pd.DataFrame({"id": [1, 2], "x": [0.5, 1.5]}))
    (create,) = [r for r in cluster.server.requests_to("POST", "/featuregroups")
                 if r.path.endswith("/featuregroups") and r.body["name"] == "tagged"]
    assert create.body["tags"]["items"] == [{"name": "source", "value": "unit"},
                                            {"name": "pii", "value": False}]
    assert json.loads(json.dumps(fg.get_tags())) == {"source": "unit", "pii": False}


def test_create_feature_group_creates_through_the_sdk_and_refuses_what_it_cannot_pass(
        hops_cluster):
    """The SDK's most used call (tutorials create, not get-or-create) on the adapter: the
    group is posted on its first insert with what was declared; options the adapter does not
    translate are refused by name, before anything reaches the cluster."""
    import pandas as pd

    from fstrain.kernel.errors import InvalidArgumentError

    cluster, project = hops_cluster
    fs = project.get_feature_store()
    posted = len(cluster.server.requests_to("POST", "/featuregroups"))
    for kwargs, match in (({"ingestion_time": "at"}, "ingestion_time"),
                          ({"stream": True}, r"\['stream'\]"),
                          ({"ttl": 3600}, r"\['ttl'\]")):
        with pytest.raises(InvalidArgumentError, match=match):
            fs.create_feature_group("created", 1, primary_key=["id"], **kwargs)
    assert len(cluster.server.requests_to("POST", "/featuregroups")) == posted
    fg = fs.create_feature_group("created", 1, primary_key=["id"], description="made here",
                                 tags={"source": "unit"})
    fg.insert(pd.DataFrame({"id": [1, 2, 3], "x": [0.5, 1.5, 2.5]}))
    (create,) = [r for r in cluster.server.requests_to("POST", "/featuregroups")
                 if r.path.endswith("/featuregroups") and r.body["name"] == "created"]
    assert create.body["description"] == "made here" and create.body["version"] == 1
    assert [f["name"] for f in create.body["features"] if f["primary"]] == ["id"]
    (group,) = cluster.server.state.groups_named("created")
    location = group.body["location"].split("8020/")[1]
    assert DeltaTable(str(cluster.server.state.hopsfs / location)).to_pyarrow_table().num_rows == 3
    assert group.commits[-1]["rowsInserted"] == 3


def test_commits_tags_and_feature_tags_round_trip_through_the_sdk(hops_cluster):
    """Commit ids newest first, an absent tag as NotFoundError (the SDK answers None for the
    server's 370002), per-feature tags as one group tag; replaces the fake-SDK versions."""
    from fstrain.kernel.errors import NotFoundError

    cluster, project = hops_cluster
    fs = project.get_feature_store()
    fg = fs.get_or_create_feature_group("people_rt", 1, primary_key=["customer_id"])
    with pytest.raises(NotFoundError, match="no commits yet"):
        fg.latest_commit_id()
    import pandas as pd

    fg.insert(pd.DataFrame({"customer_id": [1, 2], "gender": ["f", "m"]}))
    fg.insert(pd.DataFrame({"customer_id": [3], "gender": ["f"]}))
    commits = fg.commit_details()
    assert len(commits) == 2 and list(commits) == sorted(commits, reverse=True)
    assert fg.latest_commit_id() == max(commits)
    assert commits[max(commits)]["rowsInserted"] == 1
    with pytest.raises(NotFoundError, match="no tag 'pii'"):
        fg.get_tag("pii")
    fg.add_feature_tag("gender", "pii", True)
    (group,) = cluster.server.state.groups_named("people_rt")
    assert group.tags["fstrain_feature_tags"] == {"gender": {"pii": True}}
    assert fs.get_feature_group("people_rt", 1).get_feature_tags("gender") == {"pii": True}
    with pytest.raises(NotFoundError, match="no feature 'sex'"):
        fg.add_feature_tag("sex", "pii", True)
