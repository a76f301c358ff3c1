"""Deprecated home of the Hopsworks job commands, kept for one release: job entry scripts
uploaded before 0.2 import ``pipelines.jobs.job_main``. Use :mod:`fstrain.cli.jobs`."""

from fstrain.cli.jobs import ENTRY_SCRIPT, ENTRY_SCRIPT_TEXT, job_main, jobs_app

__all__ = ["ENTRY_SCRIPT", "ENTRY_SCRIPT_TEXT", "job_main", "jobs_app"]
