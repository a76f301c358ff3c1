"""Record a Hopsworks 5.2 cluster's answers to the fake server's flows, as replayable fixtures.

Usage (needs a cluster; it writes to the project it logs in to)::

    HOPSWORKS_HOST=my.cluster HOPSWORKS_PROJECT=fstrain_ci HOPSWORKS_API_KEY=... \\
        .venv/bin/python tests/hopsworks/record_fixtures.py --out /tmp/recorded [adult ...]
    FSTRAIN_HOPSWORKS_FIXTURES=/tmp/recorded .venv/bin/python -m pytest tests/hopsworks

It runs, for each named use case (default: all four), the flows the fixture-server tests run
(``pipelines/feature.py`` with the tests' small samples, the view, the default split with the
tests' anchor, the split read-back) through ``feature_store.login(backend="hopsworks")``, with a
:class:`RecordingTransport` — the real ``requests`` transport, which keeps a copy of every
answer — mounted on the SDK's sessions for the cluster's URL. Then it writes:

* ``exchanges.json``: every request (method, path below ``/hopsworks-api/api``, query, JSON
  body) with the status and JSON answer, in order, credentials answers left out;
* ``<name>_fixtures.json``: the SDK fixture format (``{key: {"response", "method",
  "path_params", "query_params"}}``) for the templates :mod:`sdk_server` reads (see
  :data:`TEMPLATES`): the first successful answer of each kind. With
  ``FSTRAIN_HOPSWORKS_FIXTURES`` pointing there, the fake server builds its answers from the
  cluster's own shapes instead of the vendored ones.

Status: written without a cluster to run it against (none is reachable from where fstrain is
developed); it is built only from pieces the test suite runs — the same flows, the same
mounting as the fake server, ``requests``' own ``HTTPAdapter`` — but the recording itself has
never run. Expect to adjust :data:`TEMPLATES` to what a 5.2 cluster answers.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import requests
from requests.adapters import HTTPAdapter

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE)]  # the repository and `sdk_server`

from sdk_server.install import _mounted
from test_hw_sdk_use_cases import ANCHOR, SMALL

API = "/hopsworks-api/api"
#: (method, pattern for "<path below the API root>?<query>", fixture name, key). The fake
#: server reads exactly these templates (sdk_server.fixtures.template). ``$`` in a pattern
#: means the end of the path (before the query).
TEMPLATES: list[tuple[str, str, str, str]] = [
    ("GET", r"/project/\d+/featurestores/[^/]+$", "feature_store", "get"),
    ("POST", r"/featurestores/\d+/featuregroups$", "feature_group", "get"),
    ("GET", r"/featuregroups/\d+/commits$", "feature_group_commit", "get_list"),
    ("GET", r"/featuregroups/\d+/tags$", "tag", "get"),
    ("GET", r"/featuregroups/\d+/expectationsuite$", "expectation_suite", "get"),
    ("POST", r"/trainingdatasets/version/\d+/compute$", "job", "get"),
    ("GET", r"/jobs/[^/]+/executions$", "execution", "get"),
    ("GET", r"/dataset/.+\?.*action=listing", "inode", "get"),
    ("GET", r"/storageconnectors/[^/]+$", "storage_connector", "get_hopsfs"),
]
_SKIPPED = re.compile(r"/credentials$|/certificates?|/apiKey")


class RecordingTransport(HTTPAdapter):
    """``requests``' real transport, keeping each exchange (no headers: they hold the key)."""

    def __init__(self, log: list[dict[str, Any]]) -> None:
        super().__init__()
        self.log = log

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        response = super().send(request, **kwargs)
        url = urlsplit(request.url or "")
        path = unquote(url.path)
        if _SKIPPED.search(path):
            return response
        self.log.append({
            "method": request.method,
            "path": path.removeprefix(API),
            "query": dict(parse_qsl(url.query, keep_blank_values=True)),
            "body": _json(request.body),
            "status": response.status_code,
            "response": _json(response.content if not kwargs.get("stream") else None),
        })
        return response


def _json(raw: Any) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw.decode() if isinstance(raw, bytes) else raw)
    except (ValueError, UnicodeDecodeError):
        return None


def record(use_cases: list[str], log: list[dict[str, Any]]) -> None:
    """Run the fixture-server tests' flows against the cluster in the environment."""
    import feature_store
    from feature_views import get_use_case
    from pipelines.feature import FeaturePipelineConfig
    from pipelines.feature import run as run_features
    from pipelines.training_dataset import TrainingDatasetConfig
    from pipelines.training_dataset import run as run_training_dataset

    host = os.environ["HOPSWORKS_HOST"]
    port = int(os.environ.get("HOPSWORKS_PORT", "443"))
    with _mounted(RecordingTransport(log), f"https://{host}:{port}/"):
        project = feature_store.login(backend="hopsworks")
        for name in use_cases:
            run_features(project, FeaturePipelineConfig(use_case=name, **SMALL[name]))
            ref = run_training_dataset(project, TrainingDatasetConfig(
                use_case=name, anchor=ANCHOR.get(name)))
            spec = get_use_case(name)
            fv = project.get_feature_store().get_feature_view(spec.feature_view_name,
                                                              spec.feature_view_version)
            fv.get_train_validation_test_split(ref.version)


def fixtures(log: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The first successful answer of each template kind, in the SDK fixture format."""
    out: dict[str, dict[str, Any]] = {}
    for exchange in log:
        if exchange["status"] // 100 != 2 or exchange["response"] is None:
            continue
        query = "&".join(f"{k}={v}" for k, v in exchange["query"].items())
        target = exchange["path"] + (f"?{query}" if query else "")
        for method, pattern, name, key in TEMPLATES:
            if method == exchange["method"] and re.search(pattern.replace("$", r"(\?|$)"),
                                                          target):
                if key not in out.setdefault(name, {}):
                    out[name][key] = {
                        "response": exchange["response"], "method": method,
                        "path_params": [p for p in exchange["path"].split("/") if p],
                        "query_params": exchange["query"],
                    }
                break
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("use_cases", nargs="*", default=sorted(SMALL))
    parser.add_argument("--out", type=Path, required=True, help="folder for the recordings")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.use_cases) - set(SMALL))
    if unknown:
        parser.error(f"unknown use case(s) {unknown}; choose from {sorted(SMALL)}")
    for var in ("HOPSWORKS_HOST", "HOPSWORKS_PROJECT"):
        if not os.environ.get(var):
            parser.error(f"set {var} (and HOPSWORKS_API_KEY or HOPSWORKS_API_KEY_FILE)")
    log: list[dict[str, Any]] = []
    try:
        record(args.use_cases, log)
    finally:  # keep what was recorded, also when a flow fails on the cluster
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "exchanges.json").write_text(json.dumps(log, indent=1, default=str))
        for name, entries in fixtures(log).items():
            (args.out / f"{name}_fixtures.json").write_text(json.dumps(entries, indent=1))
    print(f"recorded {len(log)} exchanges into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
