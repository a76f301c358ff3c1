"""Resumable checkpoints: tensors as safetensors, everything else as JSON, written atomically.

A checkpoint directory holds:

- ``model.safetensors``: the model's ``state_dict``;
- ``state.safetensors``: optimizer, scheduler and grad-scaler tensors plus RNG states (torch CPU
  and CUDA, DataLoader generator) as uint8 tensors;
- ``state.json``: the rest of the optimizer/scheduler/scaler state dicts (tensors replaced by
  references into ``state.safetensors``), Python and numpy RNG states, epoch/step counters,
  early-stopping state, history, config and lineage.

No pickle anywhere: ``torch.load`` is never called. A directory is written under a temporary
name and renamed into place (``checkpoints/last``, ``checkpoints/best``); a crash between the
two renames of a swap leaves ``.old-<name>-*``, which :func:`read` falls back to.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from fstrain.kernel.errors import ConfigError, NotFoundError

MODEL_FILE = "model.safetensors"
STATE_FILE = "state.safetensors"
META_FILE = "state.json"


# --------------------------------------------------------------------------------------------
# state_dict <-> (JSON tree, tensors)
# --------------------------------------------------------------------------------------------


def flatten(obj: Any, tensors: dict[str, Any], prefix: str) -> Any:
    """Replace tensors in a nested state dict by ``{"__tensor__": key}`` references.

    Tuples become ``{"__tuple__": [...]}`` and non-string dict keys are recorded, so
    :func:`unflatten` gives back an equal structure.
    """
    import torch

    if isinstance(obj, torch.Tensor):
        key = prefix
        tensors[key] = obj.detach().cpu().contiguous()
        return {"__tensor__": key}
    if isinstance(obj, dict):
        items = {}
        int_keys = []
        for k, v in obj.items():
            if isinstance(k, int):
                int_keys.append(str(k))
            elif not isinstance(k, str):
                raise TypeError(f"Cannot checkpoint a state dict key {k!r} at {prefix!r}.")
            items[str(k)] = flatten(v, tensors, f"{prefix}.{k}")
        return {"__dict__": items, "__int_keys__": int_keys} if int_keys else {"__dict__": items}
    if isinstance(obj, tuple):
        return {"__tuple__": [flatten(v, tensors, f"{prefix}.{i}") for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [flatten(v, tensors, f"{prefix}.{i}") for i, v in enumerate(obj)]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if hasattr(obj, "item"):  # numpy scalar
        return obj.item()
    raise TypeError(
        f"Cannot checkpoint a {type(obj).__name__} at {prefix!r} without pickle; "
        "keep state dicts to tensors, numbers, strings, lists and dicts."
    )


def unflatten(obj: Any, tensors: dict[str, Any]) -> Any:
    """Inverse of :func:`flatten`."""
    if isinstance(obj, list):
        return [unflatten(v, tensors) for v in obj]
    if isinstance(obj, dict):
        if "__tensor__" in obj:
            return tensors[obj["__tensor__"]]
        if "__tuple__" in obj:
            return tuple(unflatten(v, tensors) for v in obj["__tuple__"])
        int_keys = set(obj.get("__int_keys__", []))
        return {
            (int(k) if k in int_keys else k): unflatten(v, tensors)
            for k, v in obj["__dict__"].items()
        }
    return obj


# --------------------------------------------------------------------------------------------
# atomic directory writes
# --------------------------------------------------------------------------------------------


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _swap_into_place(tmp: Path, target: Path) -> None:
    """Rename ``tmp`` to ``target``, replacing an existing ``target`` directory."""
    old = None
    if target.exists():
        old = target.with_name(f".old-{target.name}-{uuid.uuid4().hex[:8]}")
        os.rename(target, old)
    os.rename(tmp, target)
    _fsync_dir(target.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def write(
    directory: Path,
    name: str,
    *,
    model_state: dict[str, Any],
    state_tensors: dict[str, Any],
    meta: dict[str, Any],
) -> Path:
    """Atomically write checkpoint ``directory/name`` and return its path."""
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob(f".tmp-{name}-*"):  # left by a writer killed mid-write
        shutil.rmtree(stale, ignore_errors=True)
    tmp = directory / f".tmp-{name}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    model_cpu = {k: v.detach().cpu().contiguous() for k, v in model_state.items()}
    save_file(model_cpu, str(tmp / MODEL_FILE))
    save_file(state_tensors, str(tmp / STATE_FILE))
    payload = json.dumps(meta, sort_keys=True, allow_nan=True)
    with open(tmp / META_FILE, "w") as fh:  # written last: its presence marks completeness
        fh.write(payload)
        fh.flush()
        os.fsync(fh.fileno())
    for f in (MODEL_FILE, STATE_FILE):
        with open(tmp / f, "rb") as fh:
            os.fsync(fh.fileno())
    _fsync_dir(tmp)
    target = directory / name
    _swap_into_place(tmp, target)
    for leftover in directory.glob(f".old-{name}-*"):  # the new one is in place now
        shutil.rmtree(leftover, ignore_errors=True)
    return target


def copy(directory: Path, source: str, name: str) -> Path:
    """Atomically copy checkpoint ``source`` to ``name`` (``last`` → ``best``)."""
    tmp = directory / f".tmp-{name}-{uuid.uuid4().hex[:8]}"
    shutil.copytree(directory / source, tmp)
    target = directory / name
    _swap_into_place(tmp, target)
    return target


def has_checkpoint(directory: Path) -> bool:
    """Whether ``directory`` (a run folder's ``checkpoints/``) holds a checkpoint a resume
    continues from: torch's ``last`` (or its leftover copy after a crash), or a Flax
    ``ckpt_*.json``."""
    directory = Path(directory)
    return locate(directory, "last") is not None or any(directory.glob("ckpt_*.json"))


def locate(directory: Path, name: str) -> Path | None:
    """The complete checkpoint ``name`` (or its leftover ``.old-`` copy after a crash)."""
    target = directory / name
    if (target / META_FILE).is_file():
        return target
    leftovers = sorted(
        (p for p in directory.glob(f".old-{name}-*") if (p / META_FILE).is_file()),
        key=lambda p: p.stat().st_mtime,
    )
    return leftovers[-1] if leftovers else None


def read(directory: Path, name: str = "last") -> tuple[dict[str, Any], dict[str, Any], dict]:
    """Load ``(model_state, state_tensors, meta)`` of checkpoint ``name`` (no pickle)."""
    from safetensors.torch import load_file

    path = locate(directory, name)
    if path is None:
        raise NotFoundError(
            f"No complete checkpoint {name!r} under {str(directory)!r}; "
            "train without resume=True first."
        )
    meta = json.loads((path / META_FILE).read_text())
    return load_file(str(path / MODEL_FILE)), load_file(str(path / STATE_FILE)), meta


def check_compatible(
    meta: dict[str, Any], config: dict[str, Any], lineage: dict[str, Any] | None
) -> None:
    """Refuse to resume from a checkpoint written for another config or training dataset.

    Raises:
        ConfigError: naming the first differing option(s) or lineage key(s) and both values.
    """
    diffs = _diff(meta.get("config", {}), config, "config")
    diffs += _diff(meta.get("lineage") or {}, lineage or {}, "lineage")
    if diffs:
        shown = "; ".join(diffs[:5]) + (f"; and {len(diffs) - 5} more" if len(diffs) > 5 else "")
        raise ConfigError(
            "Cannot resume: the checkpoint was written by a different run (" + shown + "). "
            "Resume with the original config and training dataset, or start fresh "
            "(resume=False) in a new workdir."
        )


def _diff(old: Any, new: Any, path: str) -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new), key=str):
            if key not in new:
                out.append(f"{path}.{key}: checkpoint has {old[key]!r}, now missing")
            elif key not in old:
                out.append(f"{path}.{key}: checkpoint lacks it, now {new[key]!r}")
            else:
                out += _diff(old[key], new[key], f"{path}.{key}")
        return out
    if isinstance(old, (list, tuple)) and isinstance(new, (list, tuple)):
        old, new = list(old), list(new)
    return [] if old == new else [f"{path}: checkpoint has {old!r}, now {new!r}"]
