"""Fixtures shared by the feature-store tests."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def local_ray() -> Iterator[Any]:
    """A local two-CPU Ray for one test, with Ray Data keeping block order; yields ``ray``.
    Its temp dir is a short folder in /tmp (Ray's Unix socket paths are capped at 107 bytes);
    afterwards Ray is shut down, the order option restored and the folder removed."""
    import ray

    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=temp)
    options = ray.data.DataContext.get_current().execution_options
    order, options.preserve_order = options.preserve_order, True
    try:
        yield ray
    finally:
        options.preserve_order = order
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
