"""Installing fstrain into a Hopsworks job environment, and the hopsworks backend's imports.

A Hopsworks Python environment has ``hopsworks[python]``, whose ``hops-deltalake`` fork provides
the ``deltalake`` module the SDK writes offline data with, and its own ``pyarrow``/``pandas``.
fstrain must install there without replacing any of them, and its hopsworks backend must never
import the embedded store's engine (``deltalake``, ``duckdb``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LOCAL_ENGINE = ("deltalake", "duckdb")

#: Refuses to import the embedded store's engine, then drives the hopsworks backend as far as
#: it goes without a cluster; prints what it saw as JSON.
DRIVER = textwrap.dedent('''
    import json, sys

    BLOCKED = ("deltalake", "duckdb")

    class Refuse:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"the hopsworks backend imported {name}")
            return None

    sys.meta_path.insert(0, Refuse())

    import feature_store
    import feature_store.hopsworks.connection
    import feature_store.hopsworks.feature_store
    import feature_store.hopsworks.feature_view
    import model_registry.hopsworks.registry
    import fstrain.cli.app, fstrain.cli.jobs, pipelines.feature, pipelines.training_dataset
    import pipelines.training, pipelines.model_validation
    from typer.testing import CliRunner

    seen = {}
    try:
        feature_store.login(backend="hopsworks", host="127.0.0.1", port=1, project="p",
                            api_key_value="k", timeout=2)
    except feature_store.BackendError as exc:
        seen["login"] = str(exc)
    runner = CliRunner()
    for name, argv in {
        "features": ["features", "ccfraud", "--backend", "hopsworks", "--json"],
        "dataset": ["dataset", "ccfraud", "--backend", "hopsworks", "--json"],
        "train": ["train", "ccfraud", "-t", "1", "--backend", "hopsworks", "--json"],
        "validate": ["validate", "ccfraud_xgb:1", "--backend", "hopsworks", "--json"],
        "jobs": ["jobs", "deploy", sys.argv[1], "--dry-run"],
    }.items():
        result = runner.invoke(fstrain.cli.app.app, argv, env={
            "HOPSWORKS_HOST": "127.0.0.1:1", "HOPSWORKS_API_KEY": "k", "HOPSWORKS_PROJECT": "p",
            "HOPSWORKS_LOGIN_TIMEOUT": "2"})
        seen[name] = [result.exit_code, result.output[-400:]]
    seen["modules"] = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    print(json.dumps(seen))
''')


def _drive(python: str, cwd: Path, env: dict[str, str] | None = None) -> dict:
    jobs_yaml = REPO / "pipelines" / "jobs_example.yaml"
    out = subprocess.run([python, "-c", DRIVER, str(jobs_yaml)], cwd=cwd, check=False, capture_output=True,
                         text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _check_driven(seen: dict) -> None:
    assert seen["modules"] == []
    assert "cannot reach Hopsworks at 127.0.0.1:1" in seen["login"]
    for stage in ("features", "dataset", "train", "validate"):
        code, output = seen[stage]
        assert code == 2 and "cannot reach Hopsworks at 127.0.0.1:1" in output, (stage, output)
    code, output = seen["jobs"]
    assert code == 0 and "--backend hopsworks" in output, output


def test_hopsworks_backend_never_imports_the_local_engine(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    _check_driven(_drive(sys.executable, tmp_path, env))


def test_local_login_without_the_local_extra_names_the_extra(tmp_path):
    code = textwrap.dedent('''
        import sys
        sys.modules["duckdb"] = None  # as if not installed: imports and find_spec fail
        import feature_store
        try:
            feature_store.login(root=sys.argv[1])
        except feature_store.ConfigError as exc:
            print(exc)
    ''')
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "store")], cwd=tmp_path,
                         check=False, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert "needs duckdb" in out.stdout and "fstrain[local]" in out.stdout, out.stderr
    assert not (tmp_path / "store").exists()


# -- a real install into a fresh Hopsworks environment ------------------------------------------

#: The feature stage through the real SDK against the fake server (only its package on the
#: path), in the environment under test: the offline writes go through that environment's
#: ``deltalake`` module, i.e. the ``hops-deltalake`` fork.
FEATURE_STAGE = textwrap.dedent('''
    import json, sys
    from pathlib import Path

    sys.path.insert(0, sys.argv[1])
    from sdk_server import serve
    from typer.testing import CliRunner
    from fstrain.cli.app import app

    root = Path(sys.argv[2])
    with serve(root / "cluster") as cluster:
        kw = cluster.login_kwargs
        env = {"HOPSWORKS_HOST": kw["host"], "HOPSWORKS_PORT": str(kw["port"]),
               "HOPSWORKS_API_KEY": kw["api_key_value"], "HOPSWORKS_PROJECT": kw["project"],
               "FSTRAIN_HOME": str(root / "client")}
        result = CliRunner().invoke(app, ["features", "ccfraud", "--n-transactions", "800",
                                          "--backend", "hopsworks", "--json"], env=env)
        import deltalake
        print(json.dumps({"code": result.exit_code, "output": result.output[-2000:],
                          "unrouted": cluster.server.unrouted,
                          "deltalake": deltalake.__file__,
                          "duckdb": "duckdb" in sys.modules}))
''')


#: The environment of the fresh venv's processes: nothing of this checkout on the path.
CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def _pip(python: Path, *args: str) -> str:
    out = subprocess.run([str(python), "-m", "pip", *args], capture_output=True, text=True,
                         timeout=900, env=CLEAN_ENV)
    assert out.returncode == 0, f"pip {' '.join(args)} failed:\n{out.stderr[-3000:]}"
    return out.stdout


def _environment(python: Path) -> dict:
    """Versions of the packages the cluster owns, and where ``deltalake`` comes from."""
    code = textwrap.dedent('''
        import json, importlib.metadata as md, importlib.util as iu
        def version(dist):
            try:
                return md.version(dist)
            except md.PackageNotFoundError:
                return None
        origin = iu.find_spec("deltalake").origin
        owners = sorted(d.metadata["Name"] for d in md.distributions()
                        if any(str(f).startswith("deltalake/") for f in (d.files or [])))
        print(json.dumps({
            "versions": {d: version(d) for d in ("hops-deltalake", "deltalake", "pyarrow",
                                                 "pandas", "numpy", "duckdb", "hopsworks")},
            "deltalake_owners": owners,
            "deltalake_init": open(origin, "rb").read().hex()[:4096],
        }))
    ''')
    out = subprocess.run([str(python), "-c", code], check=False, capture_output=True, text=True, timeout=120,
                         env=CLEAN_ENV)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


@pytest.mark.slow
def test_install_into_a_fresh_hopsworks_environment_keeps_the_clusters_packages(tmp_path):
    """``pip install 'fstrain[hopsworks-job]'`` into a venv with ``hopsworks[python]==5.2.1``
    keeps hops-deltalake, pyarrow and pandas, and the hopsworks backend runs there: the
    feature stage writes through the SDK (and so through hops-deltalake) to the fake server."""
    from fstrain.cli.job_install import build_wheel

    wheel = build_wheel(tmp_path / "wheels")  # what `fstrain jobs deploy` installs
    venv = tmp_path / "hopsworks-env"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300,
                   env=CLEAN_ENV)
    python = venv / "bin" / "python"
    _pip(python, "install", "-q", "hopsworks[python]==5.2.1")
    before = _environment(python)
    assert before["versions"]["hops-deltalake"] is not None
    assert before["deltalake_owners"] == ["hops-deltalake"]

    _pip(python, "install", "-q", f"{wheel}[hopsworks-job]")
    after = _environment(python)
    for dist in ("hops-deltalake", "pyarrow", "pandas", "numpy", "hopsworks"):
        assert after["versions"][dist] == before["versions"][dist], dist
    assert after["versions"]["deltalake"] is None and after["versions"]["duckdb"] is None
    assert after["deltalake_owners"] == ["hops-deltalake"]
    assert after["deltalake_init"] == before["deltalake_init"]

    _check_driven(_drive(str(python), tmp_path, CLEAN_ENV))
    ran = subprocess.run([str(python), "-c", FEATURE_STAGE, str(REPO / "tests" / "hopsworks"),
                          str(tmp_path / "stage")], check=False, capture_output=True, text=True,
                         timeout=600, env=CLEAN_ENV, cwd=tmp_path)
    lines = [line for line in ran.stdout.splitlines() if line.startswith("{")]
    assert lines, ran.stderr[-3000:]
    stage = json.loads(lines[-1])
    assert stage["code"] == 0, stage["output"]
    assert '"rows_inserted": 800' in stage["output"] and not stage["unrouted"]
    assert stage["deltalake"].startswith(str(venv)) and not stage["duckdb"]
    helped = subprocess.run([str(venv / "bin" / "fstrain"), "jobs", "deploy", "--help"],
                            check=False, capture_output=True, text=True, timeout=120, env=CLEAN_ENV)
    assert helped.returncode == 0 and "CONFIG.yaml" in helped.stdout
