"""``feature_store.login(backend="hopsworks", ...)``: connect to a Hopsworks cluster, fail fast.

The ``hopsworks`` SDK is imported only inside :func:`login`, so ``import feature_store`` stays
fast. Before the SDK is called, a TCP probe with a short timeout checks that the host answers:
an unreachable, firewalled or mistyped host fails in at most ``timeout`` seconds with a
:class:`~fstrain.kernel.errors.BackendError` naming ``host:port`` and what to check, instead of
hanging or printing a ``requests`` traceback. Missing settings raise
:class:`~fstrain.kernel.errors.ConfigError` before anything connects, so the SDK never falls back
to Hopsworks SaaS or prompts for an API key on a scheduled job.

Inside a Hopsworks job or notebook (``REST_ENDPOINT`` set by the cluster) the SDK authenticates
from the job's own environment: ``REST_ENDPOINT``, ``HOPSWORKS_PROJECT_ID``, the project name
(``HOPSWORKS_PROJECT_NAME``, else the ``HADOOP_USER_NAME`` prefix), the job's JWT
(``$SECRETS_DIR/token.jwt``, else ``$SECRETS_DIR/api.key``), ``HOPSWORKS_PUBLIC_HOST`` and the
project's key material in the working directory (``material_passwd``, ``k_certificate``,
``t_certificate``). There
:func:`login` needs no ``HOPSWORKS_HOST`` or API key; see :func:`in_hopsworks_job`.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests

from feature_store.hopsworks.project import HopsworksProject
from feature_store.hopsworks.sdk_calls import sdk_call
from fstrain.kernel.errors import BackendError, ConfigError, FeatureStoreError

DEFAULT_PORT = 443
DEFAULT_TIMEOUT_S = 10.0
_CHECK = (
    "Check HOPSWORKS_HOST/HOPSWORKS_PORT (or host=/port=), that the cluster is up and that this "
    "machine can reach it (VPN, firewall, proxy)."
)


#: What the cluster sets in a job's environment (read by ``hopsworks_common.client.hopsworks``).
JOB_ENDPOINT = "REST_ENDPOINT"
JOB_PROJECT_ID = "HOPSWORKS_PROJECT_ID"
JOB_PROJECT_NAME = "HOPSWORKS_PROJECT_NAME"


def in_hopsworks_job() -> bool:
    """True inside a Hopsworks job or notebook (the cluster sets ``REST_ENDPOINT``)."""
    return bool(os.environ.get(JOB_ENDPOINT))


def _job_settings(project: str | None) -> tuple[str, int, str | None]:
    """``(host, port, project)`` of the job's own cluster, from the job's environment."""
    endpoint = os.environ[JOB_ENDPOINT]
    if not os.environ.get(JOB_PROJECT_ID):
        raise ConfigError(
            f"{JOB_ENDPOINT}={endpoint!r} is set (a Hopsworks job environment) but "
            f"{JOB_PROJECT_ID} is not: the SDK authenticates a job from both. Run fstrain as a "
            "Hopsworks job, or unset REST_ENDPOINT to log in with HOPSWORKS_HOST and an API key."
        )
    parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
    if not parts.hostname:
        raise ConfigError(f"{JOB_ENDPOINT} must be a URL such as https://host:8181. Got "
                          f"{endpoint!r} instead.")
    job_project = os.environ.get(JOB_PROJECT_NAME) or None
    if project is not None and job_project is not None and project != job_project:
        raise ConfigError(
            f"this Hopsworks job runs in project {job_project!r}; it cannot log in to project "
            f"{project!r}. Deploy the job in {project!r} (fstrain jobs deploy --project "
            f"{project}) or drop the project setting."
        )
    return parts.hostname, parts.port or DEFAULT_PORT, job_project or project


def _settings(
    host: str | None, port: int | str | None, project: str | None,
    api_key_value: str | None, api_key_file: str | os.PathLike[str] | None,
) -> tuple[str, int, str | None, str | None, str | None]:
    host = host or os.environ.get("HOPSWORKS_HOST") or None
    if not host:
        raise ConfigError(
            "login(backend='hopsworks') needs a host. Pass host='my.cluster.example' or set "
            "HOPSWORKS_HOST (fstrain never falls back to Hopsworks SaaS)."
        )
    if "://" in host:
        host = host.split("://", 1)[1]
    host = host.rstrip("/")
    if port is None and ":" in host and host.rsplit(":", 1)[1].isdigit():
        host, port = host.rsplit(":", 1)
    raw_port = port if port is not None else os.environ.get("HOPSWORKS_PORT") or DEFAULT_PORT
    try:
        port_number = int(raw_port)
    except (TypeError, ValueError):
        raise ConfigError(f"Hopsworks port must be an integer. Got {raw_port!r} instead.") from None
    if not 0 < port_number < 65536:
        raise ConfigError(f"Hopsworks port must be in 1..65535. Got {port_number} instead.")
    project = project or os.environ.get("HOPSWORKS_PROJECT") or None
    key_file = None if api_key_file is None else str(api_key_file)
    if api_key_value is None and key_file is None:
        api_key_value = os.environ.get("HOPSWORKS_API_KEY") or None
        key_file = os.environ.get("HOPSWORKS_API_KEY_FILE") or None
    if api_key_value is None and key_file is None:
        raise ConfigError(
            f"login(backend='hopsworks') to {host}: no API key. Pass api_key_value= or "
            "api_key_file=, or set HOPSWORKS_API_KEY (create a key under Account settings → API "
            "keys in the Hopsworks UI)."
        )
    if key_file is not None and not Path(key_file).is_file():
        raise ConfigError(
            f"api_key_file '{key_file}' does not exist. Point it at a file holding the API key."
        )
    if project is None:  # the SDK would prompt with input() when the key has several projects
        raise ConfigError(
            f"login(backend='hopsworks') to {host}: no project. Pass project='my_project' or "
            "set HOPSWORKS_PROJECT (fstrain never lets the SDK prompt for one)."
        )
    return host, port_number, project, api_key_value, key_file


def _probe(host: str, port: int, timeout: float) -> None:
    """Open (and close) a TCP connection, so an unreachable host fails within ``timeout``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return
    except TimeoutError:
        reason = f"no answer within {timeout:g} s"
    except socket.gaierror as exc:
        reason = f"the name does not resolve ({exc.strerror or exc})"
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
    raise BackendError(f"cannot reach Hopsworks at {host}:{port}: {reason}. {_CHECK}")


def login(
    host: str | None = None,
    project: str | None = None,
    api_key_value: str | None = None,
    api_key_file: str | os.PathLike[str] | None = None,
    port: int | str | None = None,
    *,
    root: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
    hostname_verification: bool = False,
    engine: str = "python",
) -> HopsworksProject:
    """Log in to a Hopsworks project and return a :class:`HopsworksProject`.

    Args:
        host: cluster host name (``HOPSWORKS_HOST``); ``host:port`` is accepted.
        project: project name (``HOPSWORKS_PROJECT``); required (the SDK would otherwise
            prompt with ``input()`` when the API key has several projects).
        api_key_value: the API key (``HOPSWORKS_API_KEY``).
        api_key_file: a file holding the API key (``HOPSWORKS_API_KEY_FILE``).
        port: HTTPS port (``HOPSWORKS_PORT``, default 443).
        root: local cache folder for downloads and run folders (default
            ``$FSTRAIN_HOME/hopsworks/<project>``).
        timeout: seconds the reachability probe waits (``HOPSWORKS_LOGIN_TIMEOUT``, default 10).
        hostname_verification: verify the cluster's TLS certificate.
        engine: the SDK engine; ``"python"`` (no Spark) by default.

    Inside a Hopsworks job (``REST_ENDPOINT`` set, no ``host=`` passed) the job's own
    credentials are used and ``HOPSWORKS_HOST``/API key are not needed.

    Raises:
        ConfigError: host or API key missing, API key file absent, bad port; in a job: the
            job's project id missing, or another project asked for.
        BackendError: the host cannot be reached, or Hopsworks refused the login.
    """
    wait = float(timeout if timeout is not None
                 else os.environ.get("HOPSWORKS_LOGIN_TIMEOUT") or DEFAULT_TIMEOUT_S)
    if host is None and in_hopsworks_job():
        host, port_number, project = _job_settings(project or os.environ.get("HOPSWORKS_PROJECT"))
        _probe(host, port_number, wait)
        call: dict[str, Any] = {"hostname_verification": hostname_verification, "engine": engine}
    else:
        host, port_number, project, api_key_value, key_file = _settings(
            host, port, project, api_key_value, api_key_file
        )
        _probe(host, port_number, wait)
        call = {"host": host, "port": port_number, "project": project,
                "api_key_value": api_key_value, "api_key_file": key_file,
                "hostname_verification": hostname_verification, "engine": engine}
    import hopsworks

    try:
        sdk_project = sdk_call(hopsworks, "hopsworks.login", **call,
                               _owner=f"Hopsworks at {host}:{port_number}")
    except FeatureStoreError as exc:
        _forget_failed_login(hopsworks)
        cause = exc.__cause__
        if cause is not None and _is_network(cause):
            raise BackendError(
                f"cannot reach Hopsworks at {host}:{port_number}: {_first_line(cause)}. {_CHECK}"
            ) from None
        raise BackendError(
            f"login to Hopsworks at {host}:{port_number} (project {project or '<default>'}) "
            f"failed: {exc}. Check the API key and the project name."
        ) from None
    if sdk_project is None:
        _forget_failed_login(hopsworks)
        raise BackendError(
            f"Hopsworks at {host}:{port_number}: the API key has no project"
            f"{'' if project is None else f' named {project!r}'}. Create one or pass project=."
        )
    return HopsworksProject(sdk_project, root=root)


def _forget_failed_login(hopsworks: Any) -> None:
    """Undo what a refused ``hopsworks.login()`` left in the SDK's process-wide state.

    The SDK registers its connection object before it has talked to the cluster; when the
    login then fails, that half-made connection (no backend version) stays the SDK's current
    one, and later SDK code in the same process reads it: serialising a transformation
    function for the embedded store raised ``InvalidVersion: None``. A refused login leaves
    nothing behind, so the connection is dropped too.
    """
    import hopsworks.client as sdk_client

    sdk_call(hopsworks, "hopsworks.logout", _owner="a refused Hopsworks login")
    sdk_call(sdk_client, "hopsworks.client._set_connection", None,
             _owner="a refused Hopsworks login")


def _is_network(exc: BaseException) -> bool:
    return isinstance(exc, requests.ConnectionError | requests.Timeout | ConnectionError)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    if "Connection refused" in text:
        return "connection refused"
    return text.splitlines()[0][:300] if text else type(exc).__name__


__all__ = ["in_hopsworks_job", "login"]
