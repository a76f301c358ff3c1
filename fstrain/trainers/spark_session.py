"""A Spark session for one training run: local by default, a cluster given its master URL.

``local[2]`` with two shuffle partitions (the data sets fit one machine; the default 200
partitions only cost scheduling), the web UI off, the session time zone UTC (fstrain's
timestamps are UTC), and Spark's scratch (``spark.local.dir``) and SQL warehouse under the
run's own scratch folder, so nothing lands in the working directory. PySpark is imported here,
lazily: ``import fstrain.trainers`` never starts a JVM.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fstrain.kernel.errors import ConfigError

DEFAULT_MASTER = "local[2]"
SPARK_INSTALL = "pip install 'fstrain[spark]' (PySpark; it needs a Java 17+ runtime)"


def require_pyspark() -> Any:
    """The ``pyspark`` module, or a :class:`ConfigError` saying which extra to install."""
    try:
        import pyspark
    except ImportError as exc:  # pragma: no cover - the extra is installed in CI
        raise ConfigError(
            f"The Spark MLlib trainers need PySpark, which is not installed ({exc}). Install it "
            f"with `{SPARK_INSTALL}`."
        ) from None
    return pyspark


def session_conf(master: str, scratch: Path, app_name: str = "fstrain-train") -> dict[str, str]:
    """The Spark settings of a training session (the master URL is named in the model's notes)."""
    scratch = Path(scratch).resolve()
    return {
        "spark.master": master,
        "spark.app.name": app_name,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.local.dir": str(scratch / "spark-local"),
        "spark.sql.warehouse.dir": str(scratch / "spark-warehouse"),
        "spark.driver.extraJavaOptions": f"-Djava.io.tmpdir={scratch / 'spark-tmp'}",
    }


@contextmanager
def spark_session(master: str | None, scratch: Path) -> Iterator[Any]:
    """A Spark session for the duration of the block, stopped afterwards.

    Args:
        master: ``local[N]`` or a cluster URL (``spark://host:7077``, ``yarn``, ``k8s://...``);
            None means :data:`DEFAULT_MASTER`.
        scratch: the run's scratch folder; Spark's temporary files go under it.

    Raises:
        ConfigError: PySpark or Java is missing, or the master URL is refused.
    """
    require_pyspark()
    from pyspark.sql import SparkSession

    master = master or DEFAULT_MASTER
    for sub in ("spark-local", "spark-warehouse", "spark-tmp"):
        (Path(scratch) / sub).mkdir(parents=True, exist_ok=True)
    builder = SparkSession.builder
    for key, value in session_conf(master, scratch).items():
        builder = builder.config(key, value)
    try:
        session = builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - py4j/JVM start-up errors have no common root
        raise ConfigError(
            f"Spark could not start a session on master {master!r} "
            f"({type(exc).__name__}: {str(exc)[:300]}). Check the URL (--spark-master) and that "
            "a Java 17+ runtime is installed (`java -version`)."
        ) from None
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
