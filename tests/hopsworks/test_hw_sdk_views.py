"""Feature-view options through the real SDK: transformations and in-memory splits."""

from __future__ import annotations

import pandas as pd
import pytest

from feature_store.transformations import label_encoder, robust_scaler, standard_scaler
from fstrain.kernel.errors import InvalidArgumentError


@pytest.fixture(scope="module")
def tx_group(hops_cluster):
    _, project = hops_cluster
    fg = project.get_feature_store().get_or_create_feature_group("tx_t", 1, primary_key=["id"])
    fg.insert(pd.DataFrame({"id": [1, 2, 3, 4], "amount": [1.0, 2.0, 3.0, 4.0],
                            "kind": ["a", "b", "a", "b"], "y": [0, 1, 0, 1]}))
    return fg


def test_fstrain_transformations_become_hopsworks_builtins(hops_cluster, tx_group):
    """Regression: the SDK refused fstrain's standard_scaler(...) ("use the hopsworks_udf
    decorator"); they now map onto hsfs.builtin_transformations."""
    cluster, project = hops_cluster
    fs = project.get_feature_store()
    fv = fs.get_or_create_feature_view(
        "tx_view", 1, tx_group.select_all(), labels=["y"],
        transformation_functions=[standard_scaler("amount"), label_encoder("kind"),
                                  robust_scaler("amount")])
    (create,) = [r for r in cluster.server.requests_to("POST", "/featureview")
                 if r.path.endswith("/featureview") and r.body["name"] == "tx_view"]
    sent = [(t["hopsworksUdf"]["name"], t["hopsworksUdf"]["transformationFeatures"])
            for t in create.body["transformationFunctions"]]
    assert sorted(sent) == [("label_encoder", ["kind"]), ("robust_scaler", ["amount"]),
                            ("standard_scaler", ["amount"])]
    assert fv.labels == ["y"]


def test_a_transformation_without_builtin_is_refused_before_the_sdk(hops_cluster, tx_group):
    _, project = hops_cluster
    with pytest.raises(InvalidArgumentError, match="transformation_functions takes fstrain"):
        project.get_feature_store().get_or_create_feature_view(
            "tx_bad", 1, tx_group.select_all(), labels=["y"],
            transformation_functions=[lambda s: s])


def test_random_in_memory_split_is_refused_not_reshuffled(hops_cluster, tx_group):
    """Regression: in-memory versions re-shuffled on every call (the SDK takes no seed)."""
    cluster, project = hops_cluster
    fv = project.get_feature_store().get_or_create_feature_view(
        "tx_mem", 1, tx_group.select_all(), labels=["y"])
    sent = len(cluster.server.log)
    for kwargs in ({"validation_size": 0.25, "test_size": 0.25}, {"seed": 7}):
        with pytest.raises(InvalidArgumentError, match="cannot be reproduced on Hopsworks"):
            fv.train_validation_test_split(**kwargs)
    assert len(cluster.server.log) == sent  # refused before any request


def test_prohibited_tags_are_read_from_the_cluster_and_refuse_features(hops_cluster, tx_group):
    """The view's prohibited tags are checked against the group tags the SDK reads back."""
    cluster, project = hops_cluster
    fs = project.get_feature_store()
    people = fs.get_or_create_feature_group("people_t", 1, primary_key=["id"],
                                            tags={"pii": True})
    people.insert(pd.DataFrame({"id": [1, 2, 3, 4], "sex": ["f", "m", "f", "m"]}))
    tx = fs.get_feature_group("tx_t", 1)
    query = tx.select_all().join(people.select(["sex"]))  # both keyed by id
    assert [f.feature_group_id for f in query.features][-1] == people.id
    with pytest.raises(InvalidArgumentError, match="feature 'sex' comes from feature group "
                                                   "'people_t' tagged 'pii'"):
        fs.get_or_create_feature_view("tx_pii", 1, query, labels=["y"], prohibited_tags=["pii"])
    assert ("tx_pii", 1) not in cluster.server.state.feature_views
    query = tx.select_all().join(people.select(["sex"]))
    fv = fs.get_or_create_feature_view("tx_pii", 1, query, labels=["y"], prohibited_tags=["pii"],
                                       training_helper_columns=["sex"])
    view = cluster.server.state.view("tx_pii", 1)
    assert view.tags["fstrain_feature_view"]["prohibited_tags"] == ["pii"]
    assert fv.prohibited_tags == ["pii"] and fv.training_helper_columns == ["sex"]


def test_create_feature_view_takes_the_next_version_and_refuses_an_existing_one(hops_cluster,
                                                                                tx_group):
    """``fs.create_feature_view`` as on the embedded store: ``version=None`` is the next
    version; an existing name and version is AlreadyExistsError (the server's 270179)."""
    from fstrain.kernel.errors import AlreadyExistsError

    _, project = hops_cluster
    fs = project.get_feature_store()
    first = fs.create_feature_view("tx_created", tx_group.select_all(), labels=["y"])
    second = fs.create_feature_view("tx_created", tx_group.select_all(), labels=["y"])
    assert (first.version, second.version) == (1, 2)
    assert fs.get_feature_view("tx_created", 2).labels == ["y"]
    with pytest.raises(AlreadyExistsError, match=r"tx_created' v1.*errorCode 270179") as err:
        fs.create_feature_view("tx_created", tx_group.select_all(), version=1, labels=["y"])
    assert err.value.error_code == 270179


def test_reads_the_sdk_cannot_serve_are_refused_before_any_request(hops_cluster, tx_group):
    """Streamed forms exist on the embedded store only, and a ``verify`` read needs pandas
    frames: both used to reach the SDK (failing there) or skip the check without a word."""
    cluster, project = hops_cluster
    fv = project.get_feature_store().get_or_create_feature_view(
        "tx_reads", 1, tx_group.select_all(), labels=["y"])
    sent = len(cluster.server.log)
    for dataframe_type in ("torch", "ray", "arrow_batches"):
        with pytest.raises(InvalidArgumentError, match=f"{dataframe_type}.*embedded store"):
            fv.get_train_test_split(1, dataframe_type=dataframe_type)
        with pytest.raises(InvalidArgumentError, match=f"{dataframe_type}.*not available"):
            fv.get_batch_data(dataframe_type=dataframe_type)
    with pytest.raises(InvalidArgumentError, match="'polars' cannot be verified"):
        fv.get_train_test_split(1, read_options={"verify": True}, dataframe_type="polars")
    assert len(cluster.server.log) == sent


def test_a_format_the_sdk_cannot_read_back_is_refused_before_the_job(hops_cluster, tx_group):
    """The SDK's Python engine reads parquet, csv and tsv only: a jsonl version would
    materialize and then fail at every read ("not supported to read as pandas dataframe")."""
    cluster, project = hops_cluster
    fv = project.get_feature_store().get_or_create_feature_view(
        "tx_formats", 1, tx_group.select_all(), labels=["y"])
    sent = len(cluster.server.log)
    with pytest.raises(InvalidArgumentError, match=r"'jsonl' cannot be read back.*parquet"):
        fv.create_train_test_split(test_size=0.5, seed=1, data_format="jsonl")
    assert len(cluster.server.log) == sent


@pytest.mark.parametrize("data_format", ["parquet", "csv"])
def test_a_hopsworks_version_is_not_streamed_but_read_as_frames(hops_cluster, tx_group,
                                                               data_format):
    """Regression: the route to a version's files (``version_source``) asked for the streamed
    dataframe types, which Hopsworks refuses, so ``--workers 2`` with an mlp failed instead of training from frames and
    ``torch.streaming`` gave a feature-store error instead of the streaming one. The view now
    says it hands out no split files, before any read."""
    from fstrain.kernel.errors import ConfigError
    from fstrain.trainers.stream.source import TORCH_STREAMING, version_source

    cluster, project = hops_cluster
    fv = project.get_feature_store().get_or_create_feature_view(
        f"tx_stream_{data_format}", 1, tx_group.select_all(), labels=["y"])
    version, _ = fv.create_train_validation_test_split(
        validation_size=0.25, test_size=0.25, seed=1, data_format=data_format)
    td = fv.get_training_dataset(version)
    assert (td.type, td.data_format, td.state) == ("MATERIALIZED", data_format, "ok")
    assert fv.streams_split_files(version) is False
    sent = len(cluster.server.log)
    assert version_source(fv, version, reader=TORCH_STREAMING, required=False) is None
    with pytest.raises(ConfigError, match=r"hands out no split files.*torch.streaming: false"):
        version_source(fv, version, reader=TORCH_STREAMING)
    asked = {r.path.rsplit("/hopsworks-api/api/", 1)[-1] for r in cluster.server.log[sent:]}
    assert not [p for p in asked if "dataset" in p.lower().replace("trainingdataset", "")], asked
