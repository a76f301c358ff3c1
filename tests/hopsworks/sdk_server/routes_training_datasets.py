"""Training datasets of a feature view, their tags, and the job that materializes them."""

from __future__ import annotations

from typing import Any

from sdk_server.errors import TRAINING_DATASET_NOT_FOUND, not_found
from sdk_server.fixtures import envelope, template
from sdk_server.hopsfs import hopsfs_url
from sdk_server.routes_featurestore import get_tag, put_tag, tags_in
from sdk_server.routes_views import ONE
from sdk_server.rules import split_bound_ms
from sdk_server.server import FakeHopsworks, route
from sdk_server.state import FEATURE_STORE_ID, TrainingDataset
from sdk_server.td_job import materialize
from sdk_server.transport import Call
from sdk_server.views import resolve

TDS = ONE + "/trainingdatasets"
TD = TDS + "/version/{td_version}"


def _td(server: FakeHopsworks, name: str, version: str, td_version: str) -> TrainingDataset:
    td = server.state.view(name, version).training_datasets.get(int(td_version))
    if td is None:
        raise not_found(TRAINING_DATASET_NOT_FOUND, f"training dataset {name} v{version} "
                                                    f"version {td_version}")
    return td


@route("POST", TDS)
def create_td(server: FakeHopsworks, call: Call, project_id: str, fs: str, name: str,
              version: str) -> dict[str, Any]:
    view = server.state.view(name, version)
    project = server.state.project_by_id(project_id)
    posted = call.json()
    tags = tags_in(server, posted.pop("tags", None))
    for key in ("eventStartTime", "eventEndTime"):
        split_bound_ms(key, posted.get(key))
    for split in posted.get("splits") or []:
        if split.get("splitType") == "TIME_SERIES_SPLIT":
            split["startTime"] = split_bound_ms(f"{split['name']} start", split.get("startTime"))
            split["endTime"] = split_bound_ms(f"{split['name']} end", split.get("endTime"))
    td_version = int(posted.get("version") or 1 + max(view.training_datasets, default=0))
    body = dict(posted)
    body |= {
        "id": server.state.next_id(), "version": td_version, "featurestoreId": FEATURE_STORE_ID,
        "name": f"{name}_{version}", "created": "2026-01-01T00:00:00Z",
        "location": hopsfs_url(f"Projects/{project.name}/{project.name}_Training_Datasets/"
                               f"{name}_{version}_{td_version}"),
        "dataSource": {"path": "", "storageConnector": template("storage_connector", "get_hopsfs")},
    }
    body["dataSource"]["storageConnector"] |= {"featurestoreId": FEATURE_STORE_ID,
                                               "name": f"{project.name}_Training_Datasets"}
    view.training_datasets[td_version] = TrainingDataset(body, tags=tags)
    return body


@route("GET", TDS)
def list_tds(server, call, project_id, fs, name, version):
    tds = server.state.view(name, version).training_datasets
    return [tds[v].body for v in sorted(tds)]


@route("GET", TD)
def get_td(server, call, project_id, fs, name, version, td_version):
    return _td(server, name, version, td_version).body


@route("POST", TD + "/compute")
def compute_td(server: FakeHopsworks, call: Call, project_id: str, fs: str, name: str,
               version: str, td_version: str) -> dict[str, Any]:
    """Run the materialization job now (synchronously) and answer with the job."""
    td = _td(server, name, version, td_version)
    view = server.state.view(name, version)
    conf = call.json() or {}
    query = resolve(server.state, conf.get("query") or view.body["query"])
    td.job_runs += 1
    job_name = f"{name}_{version}_create_fv_td_{td_version}"
    execution_id = server.state.next_id()
    try:
        td.body["rows"], td.statistics = materialize(server.state.hopsfs, query, td.body,
                                                     view.body)
        state, log = ("FINISHED", "SUCCEEDED"), f"rows per split: {td.body['rows']}\n"
    except Exception as exc:  # noqa: BLE001  (a failing job is reported through its execution)
        td.body["jobError"] = repr(exc)
        state, log = ("FAILED", "FAILED"), f"job failed: {exc!r}\n"
    # the SDK waits until the execution's aggregated logs exist (up to 6 minutes)
    logs = f"Projects/{server.state.project_by_id(project_id).name}/Logs/Spark/{job_name}/{execution_id}"
    (server.state.hopsfs / logs).mkdir(parents=True, exist_ok=True)
    (server.state.hopsfs / logs / "stdout.log").write_text(log)
    (server.state.hopsfs / logs / "stderr.log").write_text("")
    job = template("job") | {"id": server.state.next_id(), "name": job_name,
                             "jobType": "SPARK", "config": {"type": "sparkJobConfiguration"},
                             "href": f"https://{server.host}:{server.port}/hopsworks-api/api"
                                     f"/project/{project_id}/jobs/{job_name}"}
    execution = template("execution")["items"][0] | {
        "id": execution_id, "state": state[0], "finalStatus": state[1],
        "stdoutPath": f"/{logs}/stdout.log", "stderrPath": f"/{logs}/stderr.log",
        "jobType": "SPARK", "submissionTime": "2026-01-01T00:00:00Z", "args": "",
        "progress": 1.0, "duration": 1, "user": "fstrain_ci_user",
    }
    server.state.jobs[job_name] = job
    server.state.executions.setdefault(job_name, []).insert(0, execution)
    return job


@route("GET", "/project/{project_id}/jobs/{job}/executions")
def executions(server, call, project_id, job):
    found = server.state.executions.get(job, [])
    limit = call.q("limit")
    return envelope("execution", found[: int(limit)] if limit else found)


@route("GET", "/project/{project_id}/jobs/{job}/executions/{execution_id}")
def execution(server, call, project_id, job, execution_id):
    for item in server.state.executions.get(job, []):
        if str(item["id"]) == execution_id:
            return item
    raise not_found(130009, f"execution {execution_id}")


@route("PUT", TD + "/tags/{tag}")
def put_td_tag(server, call, project_id, fs, name, version, td_version, tag):
    return put_tag(server, _td(server, name, version, td_version).tags, tag, call)


@route("GET", TD + "/tags")
def get_td_tags(server, call, project_id, fs, name, version, td_version):
    return get_tag(_td(server, name, version, td_version).tags, None)


@route("GET", TD + "/tags/{tag}")
def get_td_tag(server, call, project_id, fs, name, version, td_version, tag):
    return get_tag(_td(server, name, version, td_version).tags, tag)


@route("GET", TD + "/statistics")
def get_td_statistics(server: FakeHopsworks, call: Call, project_id: str, fs: str, name: str,
                      version: str, td_version: str) -> dict[str, Any]:
    """The statistics the materialization job stored: ``filter_by=before_transformation_eq:
    true`` selects the transformation statistics (fitted on train), else the per-split ones.
    Content (``fields=content``) is always included; an empty answer is ``count: 0``."""
    td = _td(server, name, version, td_version)
    filters = call.query.get("filter_by", [])
    before = any(f.lower() == "before_transformation_eq:true" for f in filters)
    found = td.statistics.get("transformation" if before else "splits")
    if found is None:
        return {"count": 0, "items": []}
    item = dict(found) | {"computationTime": 1767225600000, "featureStoreId": FEATURE_STORE_ID,
                          "featureViewName": name, "featureViewVersion": int(version),
                          "trainingDatasetVersion": int(td_version)}
    return {"count": 1, "items": [item]}


@route("POST", TD + "/statistics")
def post_td_statistics(server: FakeHopsworks, call: Call, project_id: str, fs: str, name: str,
                       version: str, td_version: str) -> dict[str, Any]:
    """Statistics the client computed itself (in-memory training data): stored like the job's."""
    td = _td(server, name, version, td_version)
    posted = call.json()
    td.statistics["transformation" if posted.get("beforeTransformation") else "splits"] = posted
    return dict(posted) | {"featureStoreId": FEATURE_STORE_ID, "featureViewName": name,
                           "featureViewVersion": int(version),
                           "trainingDatasetVersion": int(td_version)}
