"""Seeds, deterministic mode, and RNG state capture as JSON-able values (no pickle).

Nothing here runs at import: the global RNGs (``random``, numpy, torch) are touched only when a
training run calls :func:`seed_everything`.
"""

from __future__ import annotations

import base64
import contextlib
import os
import random
from collections.abc import Iterator
from typing import Any

import numpy as np


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, numpy's legacy global RNG and torch (CPU and every CUDA device).

    Trainer code draws its own randomness from explicit generators derived from ``seed``; the
    global RNGs are seeded too, for third-party code (dropout draws from torch's global RNG).
    """
    random.seed(seed)
    np.random.seed(seed % 2**32)
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return
    torch.manual_seed(seed)  # also seeds every CUDA device


def torch_generator(seed: int) -> Any:
    """A dedicated ``torch.Generator`` (CPU) for a DataLoader, seeded with ``seed``."""
    import torch

    gen = torch.Generator()
    gen.manual_seed(seed)
    return gen


def worker_init_fn(worker_id: int) -> None:
    """DataLoader ``worker_init_fn``: seed ``random`` and numpy from torch's per-worker seed.

    torch seeds each worker with ``base_seed + worker_id``, where ``base_seed`` comes from the
    DataLoader's generator, so workers are reproducible when the generator is.
    """
    import torch

    worker_seed = torch.initial_seed() % 2**32
    random.seed(worker_seed)
    np.random.seed(worker_seed)


@contextlib.contextmanager
def deterministic_mode(enabled: bool) -> Iterator[list[str]]:
    """Turn on torch's deterministic algorithms and cuDNN flags for the block, then restore.

    Yields a list of notes about what stays non-deterministic, for the training record.
    """
    import torch

    notes: list[str] = []
    previous = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.benchmark,
    )
    if enabled:
        # cuBLAS needs a fixed workspace for deterministic GEMMs; only effective before CUDA init.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
        notes.append(
            "torch deterministic algorithms on (cudnn.deterministic=True, benchmark=False): "
            "bitwise reproducible on the same hardware, library versions and thread count"
        )
    else:
        notes.append(
            "torch deterministic=False: CUDA kernels with atomic adds (scatter, index_add, some "
            "convolution backward passes) and cuDNN autotuning may differ run to run"
        )
    notes.append(
        f"torch intra-op threads = {torch.get_num_threads()}: float reductions can differ across "
        "thread counts and CPU/GPU models"
    )
    try:
        yield notes
    finally:
        torch.use_deterministic_algorithms(previous[0], warn_only=previous[1])
        torch.backends.cudnn.deterministic = previous[2]
        torch.backends.cudnn.benchmark = previous[3]


# --------------------------------------------------------------------------------------------
# RNG state capture / restore (JSON for Python and numpy, uint8 tensors for torch)
# --------------------------------------------------------------------------------------------


def python_rng_state() -> dict[str, Any]:
    """Python ``random`` state as JSON-able data."""
    version, internal, gauss = random.getstate()
    return {"version": version, "state": list(internal), "gauss_next": gauss}


def set_python_rng_state(data: dict[str, Any]) -> None:
    """Inverse of :func:`python_rng_state`."""
    random.setstate((data["version"], tuple(data["state"]), data["gauss_next"]))


def numpy_rng_state() -> dict[str, Any]:
    """numpy legacy global RNG state as JSON-able data (key array base64-encoded)."""
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "name": name,
        "keys_b64": base64.b64encode(np.asarray(keys, dtype="<u4").tobytes()).decode(),
        "pos": int(pos),
        "has_gauss": int(has_gauss),
        "cached_gaussian": float(cached),
    }


def set_numpy_rng_state(data: dict[str, Any]) -> None:
    """Inverse of :func:`numpy_rng_state`."""
    keys = np.frombuffer(base64.b64decode(data["keys_b64"]), dtype="<u4").astype(np.uint32)
    np.random.set_state(
        (data["name"], keys, data["pos"], data["has_gauss"], data["cached_gaussian"])
    )


def torch_rng_tensors(loader_generator: Any | None = None) -> dict[str, Any]:
    """torch CPU (and CUDA) RNG states and the DataLoader generator state as uint8 tensors."""
    import torch

    tensors = {"rng.torch_cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        for i, state in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"rng.torch_cuda.{i}"] = state
    if loader_generator is not None:
        tensors["rng.loader_generator"] = loader_generator.get_state()
    return tensors


def set_torch_rng_tensors(tensors: dict[str, Any], loader_generator: Any | None = None) -> None:
    """Inverse of :func:`torch_rng_tensors` (CUDA states restored where the device exists)."""
    import torch

    torch.set_rng_state(tensors["rng.torch_cpu"])
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            key = f"rng.torch_cuda.{i}"
            if key in tensors:
                torch.cuda.set_rng_state(tensors[key], i)
    if loader_generator is not None and "rng.loader_generator" in tensors:
        loader_generator.set_state(tensors["rng.loader_generator"])
