"""Hopsworks jobs through the SDK: upload the entry script, upsert jobs and schedules, run them.

``fstrain/cli/jobs.py`` builds the job definitions (what to run, when); this module is the only
code that talks to the SDK's job and dataset APIs for them. Reach it with
``project.get_jobs()`` on a Hopsworks project.
"""

from __future__ import annotations

import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from feature_store.hopsworks.sdk_calls import sdk_attr, sdk_call
from fstrain.kernel.errors import FeatureStoreError, NotFoundError


class HopsworksJobs:
    """The job service of one project (anything with ``get_job_api``/``get_dataset_api``)."""

    def __init__(self, project: Any) -> None:
        self._project = project

    def deploy(self, definitions: list[dict[str, Any]], script_name: str, script_text: str,
               folder: str) -> list[dict[str, Any]]:
        """Upload the entry script into ``folder``, then create/update each job and schedule."""
        self._upload_script(script_name, script_text, folder)
        jobs = self._project.get_job_api()
        return [self._upsert(jobs, d) for d in definitions]

    def install(self, artifact: Path, *, kind: str, environment: str, base_environment: str,
                folder: str) -> dict[str, Any]:
        """Upload ``artifact`` (a wheel, or a requirements file when ``kind`` is
        ``requirements``) into ``folder`` and install it into the Python ``environment`` with
        ``Environment.install_wheel``/``install_requirements``; a missing environment is first
        created by cloning ``base_environment`` (the built-in ones are read-only)."""
        owner = f"Python environment '{environment}'"
        datasets = self._project.get_dataset_api()
        if not sdk_call(datasets, "DatasetApi.exists", folder, _owner="jobs folder"):
            sdk_call(datasets, "DatasetApi.mkdir", folder, _owner="jobs folder")
        remote = sdk_call(datasets, "DatasetApi.upload", str(artifact), folder, overwrite=True,
                          _owner=f"{kind} '{artifact.name}'")
        remote = str(remote or f"{folder}/{artifact.name}")
        envs = self._project.get_environment_api()
        env = sdk_call(envs, "EnvironmentApi.get_environment", environment, _owner=owner)
        created = env is None
        if env is None:
            try:
                env = sdk_call(envs, "EnvironmentApi.create_environment", environment,
                               base_environment_name=base_environment, await_creation=True,
                               _owner=owner)
            except FeatureStoreError as exc:
                raise type(exc)(f"{exc} (while cloning '{base_environment}' into "
                                f"'{environment}' for the fstrain jobs)") from None
        if kind == "wheel":
            sdk_call(env, "Environment.install_wheel", remote, await_installation=True,
                     _owner=owner)
        else:
            sdk_call(env, "Environment.install_requirements", remote, await_installation=True,
                     _owner=owner)
        return {"environment": environment, "created": created, "installed": remote,
                "kind": kind}

    def _upload_script(self, script_name: str, script_text: str, folder: str) -> None:
        datasets = self._project.get_dataset_api()
        if not sdk_call(datasets, "DatasetApi.exists", folder, _owner="jobs folder"):
            sdk_call(datasets, "DatasetApi.mkdir", folder, _owner="jobs folder")
        with tempfile.TemporaryDirectory() as tmp:
            script = Path(tmp) / script_name
            script.write_text(script_text)
            sdk_call(datasets, "DatasetApi.upload", str(script), folder, overwrite=True,
                     _owner="job entry script")

    @staticmethod
    def _upsert(jobs: Any, d: dict[str, Any]) -> dict[str, Any]:
        owner = f"job '{d['name']}'"
        base = sdk_call(jobs, "JobApi.get_configuration", "PYTHON", _owner=owner) or {}
        job = sdk_call(jobs, "JobApi.create_job", d["name"], {**base, **d["config"]}, _owner=owner)
        if d["schedule"] is not None:
            start = d["schedule"]["start_time"]
            sdk_call(job, "Job.schedule", cron_expression=d["schedule"]["cron_expression"],
                     start_time=None if start is None else datetime.fromisoformat(start),
                     _owner=owner)
        elif sdk_attr(job, "Job", "job_schedule") is not None:
            sdk_call(job, "Job.unschedule", _owner=owner)
        return {"name": d["name"], "schedule": d["schedule"] and d["schedule"]["cron_expression"]}

    def list(self, prefix: str) -> list[dict[str, Any]]:
        """Jobs whose name starts with ``prefix``, with their schedule."""
        out = []
        for job in sdk_call(self._project.get_job_api(), "JobApi.get_jobs", _owner="jobs") or []:
            name = sdk_attr(job, "Job", "name")
            if not name.startswith(prefix):
                continue
            schedule = sdk_attr(job, "Job", "job_schedule")
            out.append({
                "name": name,
                "schedule": None if schedule is None else sdk_attr(schedule, "JobSchedule", "cron_expression"),
                "enabled": None if schedule is None else sdk_attr(schedule, "JobSchedule", "enabled"),
            })
        return out

    def run(self, plan: dict[str, Any]) -> dict[str, Any]:
        """Start the job named in ``plan`` with its ``[start_time, end_time)`` window."""
        owner = f"job '{plan['job']}'"
        job = sdk_call(self._project.get_job_api(), "JobApi.get_job", plan["job"], _owner=owner)
        if job is None:
            raise NotFoundError(f"{owner} does not exist in Hopsworks. Deploy it with "
                                "`fstrain jobs deploy CONFIG.yaml` or check `fstrain jobs list`.")
        start = plan["start_time"] and datetime.fromisoformat(plan["start_time"])
        end = plan["end_time"] and datetime.fromisoformat(plan["end_time"])
        execution = sdk_call(job, "Job.run", args=plan.get("args"),
                             await_termination=plan["await_termination"],
                             start_time=start, end_time=end, _owner=owner)
        if execution is None:  # the SDK found a run of this job already going
            return {**plan, "execution": None}
        return {**plan, "execution": {
            "id": sdk_attr(execution, "Execution", "id"),
            "state": sdk_attr(execution, "Execution", "state"),
            "final_status": sdk_attr(execution, "Execution", "final_status"),
        }}
