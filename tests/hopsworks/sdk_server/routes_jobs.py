"""Jobs: default configuration, create/update (PUT upsert), get/list, schedules, executions.

Server rules (as Hopsworks enforces them):

* a ``PYTHON`` job's ``appPath`` must be an existing file in HopsFS and its
  ``environmentName`` an existing Python environment (else HTTP 400), so a job can only be
  created after its entry script is uploaded and its environment exists;
* a schedule's ``cronExpression`` must be a Quartz cron expression: 6 or 7 fields, seconds
  first, exactly one of day-of-month/day-of-week ``?`` (else HTTP 400);
* starting an execution records its arguments and environment variables (``HOPS_START_TIME``
  and ``HOPS_END_TIME`` of a backfill), which tests read from :attr:`State.executions`.

Execution reads (``GET .../executions``) are answered by :mod:`routes_training_datasets`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from sdk_server.errors import ILLEGAL_ARGUMENT, HttpError, bad_request, not_found
from sdk_server.hopsfs import local_path
from sdk_server.routes_environments import environments
from sdk_server.server import FakeHopsworks, route
from sdk_server.state import USERNAME
from sdk_server.transport import Call

JOBS = "/project/{project_id}/jobs"
#: RESTCodes.JobErrorCode.JOB_NOT_FOUND / JOB_CREATION_ERROR / JOB_SCHEDULE_UPDATE.
JOB_NOT_FOUND = 130009
JOB_CREATION_ERROR = 130010
JOB_SCHEDULE_INVALID = 130033
_QUARTZ_FIELD = re.compile(r"^[0-9A-Z*?/,#LW-]+$")


def _job(server: FakeHopsworks, project_id: str, name: str) -> dict[str, Any]:
    """A job of this project (jobs are kept by name, each recording its project)."""
    job = server.state.jobs.get(name)
    if job is None or str(job.get("projectId")) != str(project_id):
        raise not_found(JOB_NOT_FOUND, f"job {name}")
    return job


def _answer(job: dict[str, Any]) -> dict[str, Any]:
    """A copy (the SDK pops ``config`` out of what it receives)."""
    return {k: v for k, v in json.loads(json.dumps(job)).items() if k != "projectId"}


@route("GET", JOBS + "/{job_type}/configuration")
def configuration(server: FakeHopsworks, call: Call, project_id: str, job_type: str) -> dict:
    if job_type != "python":
        raise bad_request(ILLEGAL_ARGUMENT, f"no default configuration for {job_type}")
    return {"type": "pythonJobConfiguration", "appPath": None, "defaultArgs": None,
            "environmentName": "python-feature-pipeline", "files": None,
            "resourceConfig": {"memory": 2048, "cores": 1.0, "gpus": 0}, "logRedirection": True}


@route("PUT", JOBS + "/{name}")
def create_or_update(server: FakeHopsworks, call: Call, project_id: str, name: str) -> dict:
    project = server.state.project_by_id(project_id)
    config = call.json() or {}
    if config.get("jobType") == "PYTHON" or config.get("type") == "pythonJobConfiguration":
        app = str(config.get("appPath") or "")
        path = app.split("hdfs://", 1)[-1]
        if not app or not local_path(server.state.hopsfs, path).is_file():
            raise bad_request(JOB_CREATION_ERROR, f"app file {app!r} does not exist",
                              "The job's app file does not exist")
        env = config.get("environmentName")
        if env not in environments(server):
            raise bad_request(JOB_CREATION_ERROR, f"environment {env!r} does not exist")
    previous = server.state.jobs.get(name)
    if previous is not None and str(previous.get("projectId")) != str(project.id):
        raise bad_request(JOB_CREATION_ERROR, f"job name {name} is taken (fake server: job "
                          "names are unique across projects)")
    job = {
        "id": previous["id"] if previous else server.state.next_id(),
        "name": name, "creationTime": "2026-01-01T00:00:00Z", "config": config,
        "jobType": config.get("jobType", "PYTHON"), "creator": {"username": USERNAME},
        "href": f"/hopsworks-api/api/project/{project.id}/jobs/{name}",
        "jobSchedule": previous.get("jobSchedule") if previous else None,
        "projectId": project.id,
    }
    server.state.jobs[name] = job
    return _answer(job)


@route("GET", JOBS + "/{name}")
def get_job(server: FakeHopsworks, call: Call, project_id: str, name: str) -> dict:
    return _answer(_job(server, project_id, name))


@route("GET", JOBS)
def list_jobs(server: FakeHopsworks, call: Call, project_id: str) -> dict:
    items = [_answer(j) for j in server.state.jobs.values()
             if str(j.get("projectId")) == str(project_id)]
    return {"count": len(items), "items": items}


def _check_quartz(expression: Any) -> None:
    fields = str(expression or "").split()
    problem = None
    if len(fields) not in (6, 7):
        problem = f"{len(fields)} fields (Quartz takes 6 or 7, seconds first)"
    elif not all(_QUARTZ_FIELD.match(f) for f in fields):
        problem = "an unknown character"
    elif (fields[3] == "?") == (fields[5] == "?"):
        problem = "exactly one of day-of-month and day-of-week must be '?'"
    if problem:
        raise HttpError(400, JOB_SCHEDULE_INVALID, f"invalid cron expression "
                        f"{expression!r}: {problem}", "Invalid cron expression")


@route("POST", JOBS + "/{name}/schedule/v2")
@route("PUT", JOBS + "/{name}/schedule/v2")
def schedule(server: FakeHopsworks, call: Call, project_id: str, name: str) -> dict:
    job = _job(server, project_id, name)
    body = call.json() or {}
    _check_quartz(body.get("cronExpression"))
    stored = {**body, "id": (job.get("jobSchedule") or {}).get("id") or server.state.next_id(),
              "enabled": body.get("enabled", True)}
    job["jobSchedule"] = stored
    return dict(stored)


@route("DELETE", JOBS + "/{name}/schedule/v2")
def unschedule(server: FakeHopsworks, call: Call, project_id: str, name: str) -> tuple:
    _job(server, project_id, name)["jobSchedule"] = None
    return 204, None


@route("POST", JOBS + "/{name}/executions")
def start(server: FakeHopsworks, call: Call, project_id: str, name: str) -> dict:
    job = _job(server, project_id, name)
    if call.headers.get("content-type", call.headers.get("Content-Type", "")).startswith(
            "application/json"):
        body = call.json() or {}
        args, env = body.get("args"), dict(body.get("envVars") or {})
    else:
        args, env = (call.raw.decode() or None), {}
    execution = {
        "id": server.state.next_id(), "state": "INITIALIZING", "finalStatus": "UNDEFINED",
        "submissionTime": "2026-01-01T00:00:00Z", "args": args if args is not None
        else job["config"].get("defaultArgs"), "envVars": env, "user": USERNAME,
        "stdoutPath": None, "stderrPath": None, "duration": 0, "progress": 0.0,
        "success": None, "href": f"{job['href']}/executions",
    }
    server.state.executions.setdefault(name, []).insert(0, execution)
    return {k: v for k, v in execution.items() if k != "envVars"}
