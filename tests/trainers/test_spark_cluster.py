"""Spark MLlib trainer on a real Spark standalone cluster (one master, one worker, this machine).

The fixture starts PySpark's own ``Master`` and ``Worker`` JVMs (``bin/spark-class`` of the pip
package) on free loopback ports, waits until the worker has registered, and kills both process
groups afterwards (the worker's executor JVMs are its children), whatever the test did. The
training run is a real ``fstrain train`` process given ``--spark-master spark://...``: its
model must be registered like a ``local[2]`` run's (same file layout and lineage, same
predictions), the application must have run its executors on the standalone worker, and model
validation must score it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from fstrain.cli.app import app

pyspark = pytest.importorskip("pyspark")
REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 120.0


def _cli(root: Path, *args: str):
    return CliRunner().invoke(app, [*args, "--root", str(root)])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Standalone:
    """A running standalone cluster: its master URL, web UI JSON address, worker folder."""

    url: str
    json_url: str
    work_dir: Path

    def state(self) -> dict:
        """The master's state (``/json/``): workers, active and completed applications."""
        with urllib.request.urlopen(self.json_url, timeout=10) as resp:
            return json.loads(resp.read())


def _spark_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        "SPARK_LOCAL_IP": "127.0.0.1",  # master, worker and the driver bind to loopback
        "SPARK_LOCAL_DIRS": str(tmp / "local"),
        "SPARK_NO_DAEMONIZE": "1",
    })
    return env


def _start(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with log.open("wb") as out:  # the child keeps its own descriptor
        return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # its own process group, killed below


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM the process group (the JVM and any executor it launched), then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        try:  # the JVM is gone; an executor it started may outlive it for a moment
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return


def _wait_for_worker(cluster: Standalone, procs: list[subprocess.Popen], logs: list[Path]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            break
        try:
            if cluster.state().get("aliveworkers", 0) >= 1:
                return
        except OSError:
            pass
        time.sleep(1.0)
    tails = "\n".join(f"--- {log.name}\n{log.read_text(errors='replace')[-2000:]}" for log in logs)
    raise AssertionError(f"the standalone worker did not register with {cluster.url}\n{tails}")


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[Standalone]:
    """A Spark standalone master and one worker (1 core, 1 GiB) on loopback; torn down after."""
    spark_class = str(Path(pyspark.__file__).parent / "bin" / "spark-class")
    tmp = tmp_path / "cluster"
    for sub in ("local", "work"):
        (tmp / sub).mkdir(parents=True)
    env = _spark_env(tmp)
    port, webui = _free_port(), _free_port()
    cluster = Standalone(url=f"spark://127.0.0.1:{port}",
                         json_url=f"http://127.0.0.1:{webui}/json/", work_dir=tmp / "work")
    procs: list[subprocess.Popen] = []
    logs = [tmp / "master.log", tmp / "worker.log"]
    try:
        procs.append(_start([spark_class, "org.apache.spark.deploy.master.Master",
                             "--host", "127.0.0.1", "--port", str(port),
                             "--webui-port", str(webui)], env, logs[0]))
        procs.append(_start([spark_class, "org.apache.spark.deploy.worker.Worker", cluster.url,
                             "--host", "127.0.0.1", "--webui-port", str(_free_port()),
                             "--cores", "1", "--memory", "1g",
                             "--work-dir", str(cluster.work_dir)], env, logs[1]))
        _wait_for_worker(cluster, procs, logs)
        yield cluster
    finally:
        for proc in reversed(procs):
            _stop(proc)


@pytest.fixture(scope="module")
def adult_root(tmp_path_factory):
    """The Spark tests' data: a 1,500-row slice of the adult use case, one Parquet version."""
    root = tmp_path_factory.mktemp("spark_cluster_store")
    assert _cli(root, "features", "adult", "--sample", "1500").exit_code == 0
    out = _cli(root, "dataset", "adult")
    assert out.exit_code == 0, out.output
    return root


def _train(root: Path, master: str) -> None:
    """``fstrain train adult --model spark_gbt`` in its own process (its own driver JVM), the
    user's environment as it is, ``--root`` relative to the working directory (an executor's
    working directory is its folder on the worker, so a path left relative would land there).
    ``--force``: the same version and configuration would otherwise reuse the first model (a
    scheduled re-run's rule), and the point is to train again, on the given master."""
    cmd = [sys.executable, "-m", "fstrain.cli.app", "train", "adult", "-t", "1",
           "--model", "spark_gbt", "--param", "maxIter=4", "--param", "maxDepth=3",
           "--spark-master", master, "--root", root.name, "--json", "--force"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(cmd, env=env, cwd=root.parent, capture_output=True, text=True,
                          check=False, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def _shape(paths: set[str]) -> set[str]:
    """Manifest paths with Spark's random ids masked (part-file UUIDs, stage uids)."""
    paths = {re.sub(r"part-(\d+)-[0-9a-f-]{36}", r"part-\1-<uuid>", p) for p in paths}
    return {re.sub(r"/(\d+_[A-Za-z]+)_[0-9a-f]{12}/", r"/\1_<uid>/", p) for p in paths}


@pytest.mark.slow
def test_spark_gbt_trains_on_a_standalone_cluster(adult_root, standalone, tmp_path):
    import feature_store
    from fstrain.trainers import load_predictor

    _train(adult_root, "local[2]")
    _train(adult_root, standalone.url)

    state = standalone.state()
    apps = [a for a in state["completedapps"] if a["name"] == "fstrain-train"]
    assert len(apps) == 1 and apps[0]["state"] == "FINISHED", state
    assert not state["activeapps"]
    executors = sorted(standalone.work_dir.glob(f"{apps[0]['id']}/*/stderr"))
    assert executors and "Finished task" in executors[0].read_text(errors="replace"), \
        f"no executor of {apps[0]['id']} ran tasks on the worker"
    stray = [p for p in standalone.work_dir.rglob("*") if p.name not in ("stdout", "stderr")
             and p.is_file()]
    assert not stray, f"the executors wrote outside the run's folders: {stray}"

    mr = feature_store.login(root=adult_root).get_model_registry()
    local, cluster = mr.get_model("adult_income", 1), mr.get_model("adult_income", 2)
    # the trainer's note records the SparkContext's own master
    assert f"on {standalone.url}:" in cluster.training_config["nondeterminism"][0]
    assert "on local[2]:" in local.training_config["nondeterminism"][0]
    paths = [{e["path"] for e in m.manifest["files"]} for m in (local, cluster)]
    assert _shape(paths[0]) == _shape(paths[1])
    assert any("GBTClassifier" in p and "/data/part-" in p for p in paths[1])
    assert local.manifest["lineage"] == cluster.manifest["lineage"]

    fv = feature_store.login(root=adult_root).get_feature_store().get_feature_view("adult_income", 1)
    X_test = fv.get_train_validation_test_split(1)[2]
    mine, theirs = (load_predictor(Path(m.download(str(tmp_path / f"v{m.version}"))))
                    .predict_proba(X_test) for m in (local, cluster))
    np.testing.assert_allclose(theirs, mine, rtol=0, atol=1e-9)

    out = _cli(adult_root, "validate", "adult_income:2", "--json")
    assert out.exit_code in (0, 3), out.output
    record = json.loads(out.output)
    assert record["key_metric"] == "roc_auc" and record["key_value"] > 0.75
