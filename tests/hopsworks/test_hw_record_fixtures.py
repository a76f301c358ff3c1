"""What can be checked of the recorder without a cluster: its templates are the ones the fake
server reads, and a recorded log becomes fixtures the server then uses."""

from __future__ import annotations

import json
import re

import record_fixtures
from sdk_server import fixtures as server_fixtures

SERVER = "tests/hopsworks/sdk_server"


def test_recorded_templates_are_the_ones_the_fake_server_reads():
    from pathlib import Path

    used = set()
    for path in Path(SERVER).glob("*.py"):
        for name, key in re.findall(r'(?:template|envelope)\("(\w+)"(?:[^)]*?, "(\w+)"\))?',
                                    path.read_text()):
            used.add((name, key or "get"))
    recorded = {(name, key) for _, _, name, key in record_fixtures.TEMPLATES}
    assert recorded <= used  # nothing recorded that the server would not read
    assert used - recorded <= {("user", "get"), ("expectation_suite", "get_list_empty")}


def test_a_recorded_answer_replaces_the_vendored_template(tmp_path, monkeypatch):
    log = [
        {"method": "GET", "path": "/project/119/featurestores/67/featuregroups/5/commits",
         "query": {"limit": "1"}, "body": None, "status": 200,
         "response": {"count": 1, "items": [{"commitID": 9, "rowsInserted": 3}]}},
        {"method": "GET", "path": "/project/119/featurestores/67/featuregroups/5/tags",
         "query": {}, "body": None, "status": 404, "response": {"errorCode": 370002}},
    ]
    recorded = record_fixtures.fixtures(log)
    assert list(recorded) == ["feature_group_commit"]  # failed answers are not templates
    for name, entries in recorded.items():
        (tmp_path / f"{name}_fixtures.json").write_text(json.dumps(entries))
    monkeypatch.setenv("FSTRAIN_HOPSWORKS_FIXTURES", str(tmp_path))
    assert server_fixtures.template("feature_group_commit", "get_list")["items"][0]["commitID"] == 9
    assert server_fixtures.template("tag")["items"][0]["type"] == "tagDTO"  # vendored fallback
