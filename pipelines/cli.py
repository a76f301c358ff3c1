"""Deprecated home of the ``fstrain`` command, kept for one release: deployed Hopsworks job
scripts and console scripts installed before 0.2 import ``pipelines.cli``. Use
:mod:`fstrain.cli.app`."""

from fstrain.cli.app import app, main

__all__ = ["app", "main"]

if __name__ == "__main__":  # pragma: no cover
    main()
