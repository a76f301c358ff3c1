"""``fstrain doctor RUN_OR_MODEL``: check a training run against the common failure modes.

The target is a registered model (``NAME``, ``NAME:VERSION``) or a torch run folder (its name
under ``<root>/runs/``, e.g. ``adult_mlp_td1``, or a path), which is what is left of a run that
diverged before it could be registered. The doctor reads what the run recorded (learning
curves, gradient norms, timings, the imbalance record, ``checkpoints/diverged.json``), reads
the training split again to look for leakage suspects, re-runs the first round/epoch with the
recorded config and seeds to compare with the record, and on a CUDA machine reports the GPU's
memory and utilisation. The checks themselves are in :mod:`fstrain.tools.doctor_checks`.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from feature_store.core.late_data import DEFAULT_THRESHOLD
from fstrain.kernel.errors import ConfigError, NotFoundError
from fstrain.tools.doctor_checks import (
    Finding,
    check_flat,
    check_gap,
    check_gradients,
    check_imbalance,
    check_input_pipeline,
    check_late_data,
    check_leakage,
    check_nan,
    check_reproducible,
    summary,
)
from fstrain.trainers import checkpoint as ckpt
from fstrain.trainers.config import load_config
from fstrain.trainers.curves import read_curves
from model_registry.naming import MODEL_NAME_PATTERN


@dataclass
class DoctorReport:
    """The findings on one run or model version."""

    target: str
    kind: str  # "model" or "run"
    findings: list[Finding] = field(default_factory=list)

    @property
    def severe(self) -> bool:
        """Whether any finding is severe (the CLI then exits non-zero)."""
        return any(f.severity == "severe" for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready report."""
        return {"target": self.target, "kind": self.kind, "severe": self.severe,
                "summary": summary(self.findings),
                "findings": [f.to_dict() for f in self.findings]}

    def to_text(self) -> str:
        """The human-readable report: one block per finding, evidence and fix."""
        marks = {"severe": "SEVERE ", "warning": "WARNING", "ok": "ok     ",
                 "skipped": "skipped"}
        lines = [f"doctor: {self.kind} {self.target}"]
        for f in self.findings:
            lines.append(f"  [{marks[f.severity]}] {f.check}: {f.title}")
            if f.severity in ("severe", "warning"):
                lines.append(f"      evidence: {json.dumps(f.evidence, default=_short)[:400]}")
                if f.fix:
                    lines.append(f"      fix: {f.fix}")
        counts = summary(self.findings)
        lines.append(f"{counts['severe']} severe, {counts['warning']} warning(s), "
                     f"{counts['ok']} ok, {counts['skipped']} skipped")
        return "\n".join(lines)


def _short(value: Any) -> Any:
    return float(f"{value:.4g}") if isinstance(value, float) else str(value)


def diagnose(project: Any, target: str, *, rerun: bool = True,
             max_rows: int = 5000, late_data_threshold: float = DEFAULT_THRESHOLD) -> DoctorReport:
    """Check ``target`` (a model ``NAME[:VERSION]`` or a torch run folder); see the module doc.

    Args:
        project: the logged-in project.
        target: ``NAME``, ``NAME:VERSION``, a run name under ``<root>/runs`` or a run path.
        rerun: re-run the first round/epoch to check reproducibility (off: skipped).
        max_rows: rows of the train split sampled for the leakage check.
        late_data_threshold: the share of a joined group's rows committed after their label
            time above which the training-dataset version is flagged as possible leakage.
    """
    if not 0 <= late_data_threshold < 1:
        raise ConfigError(f"doctor: --late-data-threshold must be a share in [0, 1), e.g. 0.01 "
                          f"for 1%. Got {late_data_threshold!r} instead.")
    folder = _run_folder(project, target)
    if folder is not None:
        return _diagnose_run(folder, target)
    name, _, version = target.partition(":")
    _require_model_reference(project, target, name)
    registry = project.get_model_registry()
    if version and version != "latest":
        if not version.isdigit() or int(version) < 1:
            raise ConfigError(f"doctor: the version after ':' in {target!r} must be a positive "
                              f"integer, e.g. '{name}:1'. Got {version!r} instead.")
        model = registry.get_model(name, int(version))
    else:
        models = registry.get_models(name)
        if not models:
            raise NotFoundError(f"doctor: {target!r} is neither a registered model nor a run "
                                f"folder under {Path(project.root) / 'runs'}.")
        model = max(models, key=lambda m: m.version)
    return _diagnose_model(project, model, rerun=rerun, max_rows=max_rows,
                           late_data_threshold=late_data_threshold)


def _require_model_reference(project: Any, target: str, name: str) -> None:
    """``target`` is no run folder; unless ``name`` can be a model's name, say it is neither
    (not that a model should be renamed)."""
    if re.fullmatch(MODEL_NAME_PATTERN, name):
        return
    path = Path(target)
    seen = ("it is a file" if path.is_file() else "it is a folder without checkpoints/"
            if path.is_dir() else "no such file or folder")
    raise ConfigError(
        f"doctor: {target!r} is neither a model reference (NAME[:VERSION], NAME of letters, "
        f"digits and '_') nor a run folder (a torch run's folder with checkpoints/, by its "
        f"name under {Path(project.root) / 'runs'} or its path): {seen}."
    )


def _run_folder(project: Any, target: str) -> Path | None:
    for candidate in (Path(project.root) / "runs" / target, Path(target)):
        if ":" not in target and (candidate / "checkpoints").is_dir():
            return candidate
    return None


def _diagnose_run(folder: Path, target: str) -> DoctorReport:
    """Checks from a torch run folder's checkpoints and divergence record (no re-run)."""
    from fstrain.trainers.loop import DIVERGED_FILE
    from fstrain.trainers.torch_models import torch_curves

    ckdir = folder / "checkpoints"
    diverged = (json.loads((ckdir / DIVERGED_FILE).read_text())
                if (ckdir / DIVERGED_FILE).is_file() else None)
    meta = ckpt.read(ckdir, "last")[2] if ckpt.locate(ckdir, "last") is not None else {}
    history = (diverged or {}).get("history") or meta.get("loop", {}).get("history") or []
    selection = meta.get("selection") or {"metric": (diverged or {}).get("metric", "logloss"),
                                          "mode": (diverged or {}).get("mode", "min")}
    curves = (torch_curves(history, selection["metric"], selection["mode"],
                           meta.get("loop", {}).get("best_epoch")).to_dict() if history else None)
    torch_opts = (meta.get("config") or {}).get("torch") or {}
    findings = [
        check_nan(curves, {k: v for k, v in diverged.items() if k != "history"}
                  if diverged else None),
        check_flat(curves, {}),
        check_gradients(curves, torch_opts.get("grad_clip"), torch_opts.get("amp")),
        check_gap(curves, tuned=False),
        check_input_pipeline(curves, {}),
        check_reproducible(None, None, None, why_not="a run folder has no registered model to "
                           "re-run; doctor the registered model instead"),
    ]
    findings += _gpu_findings()
    return DoctorReport(str(folder if Path(target) == folder else target), "run", findings)


def _diagnose_model(project: Any, model: Any, *, rerun: bool, max_rows: int,
                    late_data_threshold: float = DEFAULT_THRESHOLD) -> DoctorReport:
    manifest = model.manifest
    tc = manifest.get("training_config") or {}
    curves, features = _model_files(model)
    imbalance = tc.get("imbalance") or {}
    cfg = load_config(tc["trainer"]) if tc.get("trainer") else None
    tuned = bool(tc.get("tuning"))
    splits = _splits(project, model, tc, features)
    findings = [
        check_nan(curves, None),
        check_flat(curves, imbalance),
        check_gradients(curves, cfg.torch.grad_clip if cfg is not None else None,
                        cfg.torch.amp if cfg is not None and cfg.is_torch else None),
        check_gap(curves, tuned),
        check_input_pipeline(curves, tc.get("timings") or {}),
        check_leakage(_leak_table(splits, max_rows)),
        check_late_data(_td_extra(project, model), late_data_threshold),
        check_imbalance(imbalance, (curves or {}).get("metric")),
        _reproducibility(cfg, curves, splits, tc, rerun=rerun),
    ]
    findings += _gpu_findings()
    return DoctorReport(f"{model.name}:{model.version}", "model", findings)


def _model_files(model: Any) -> tuple[dict[str, Any] | None, list[str] | None]:
    """The version's learning curves and the feature columns its predictor takes."""
    from fstrain.trainers.predictor import PREDICTOR_FILE

    with tempfile.TemporaryDirectory(prefix="fstrain-doctor-") as scratch:
        folder = Path(model.download(scratch))
        curves = read_curves(folder)
        record = (json.loads((folder / PREDICTOR_FILE).read_text())
                  if (folder / PREDICTOR_FILE).is_file() else {})
    names = (record.get("features") or {}).get("names")
    return (curves.to_dict() if curves is not None else None), names


def _td_extra(project: Any, model: Any) -> dict[str, Any] | None:
    """The ``extra`` record (late data, as-known) of the version the model was trained on."""
    if not model.feature_view_name or model.training_dataset_version is None:
        return None
    fv = project.get_feature_store().get_feature_view(model.feature_view_name,
                                                      model.feature_view_version)
    return dict(fv.get_training_dataset(model.training_dataset_version).extra or {})


def _splits(project: Any, model: Any, tc: dict[str, Any],
            features: list[str] | None) -> tuple[Any, ...] | None:
    """``(X_tr, X_va, y_tr, y_va)`` as the training pipeline read them (the model's feature
    columns only, when its predictor names them), or None."""
    if not model.feature_view_name or model.training_dataset_version is None:
        return None
    from feature_store.core.carve import read_three_way

    fv = project.get_feature_store().get_feature_view(model.feature_view_name,
                                                      model.feature_view_version)
    (X_tr, X_va, _X_te, y_tr, y_va, _y_te), _ = read_three_way(
        fv, model.training_dataset_version, carve=tc.get("validation_split"))
    if features and set(features) <= set(X_tr.columns):
        X_tr, X_va = X_tr[features], X_va[features]
    return X_tr, X_va, y_tr, y_va


def _leak_table(splits: tuple[Any, ...] | None, max_rows: int) -> Any:
    if splits is None:
        return None
    from fstrain.tools.feature_selection import rank_features

    X_tr, _X_va, y_tr, _y_va = splits
    return rank_features(X_tr, y_tr, seed=0, max_rows=max_rows)


class _FirstStepDone(Exception):
    """Raised from the trainer's report callback to stop after the first round/epoch."""

    def __init__(self, row: dict[str, Any]) -> None:
        super().__init__("first step done")
        self.row = row


def _reproducibility(cfg: Any, curves: dict[str, Any] | None, splits: tuple[Any, ...] | None,
                     tc: dict[str, Any], *, rerun: bool) -> Finding:
    """Re-run the first round/epoch (a one-point curve: the whole fit) and compare."""
    if not rerun:
        return check_reproducible(None, None, None, why_not="--no-rerun")
    if cfg is None or curves is None or splits is None:
        return check_reproducible(None, None, None, why_not="the model has no recorded trainer "
                                  "config, curves or training data to re-run")
    import pandas as pd

    from fstrain.trainers import train

    X_tr, X_va, y_tr, y_va = splits
    if tc.get("tuning"):  # the refit trained on train + validation without early stopping
        X_tr, y_tr = pd.concat([X_tr, X_va], ignore_index=True), pd.concat([y_tr, y_va],
                                                                           ignore_index=True)
        cfg = cfg if cfg.is_torch else cfg.with_overrides({"early_stopping_rounds": None})
    whole_fit = curves["unit"] in ("fit", "trees")

    def stop(row: dict[str, Any]) -> None:
        if not whole_fit:
            raise _FirstStepDone(dict(row))

    row: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="fstrain-doctor-rerun-") as scratch:
        try:
            result = train(cfg, X_tr, y_tr, X_va, y_va, workdir=Path(scratch), report=stop,
                           resume=False)
            row = dict(result.history[-1]) if result.history else {}
        except _FirstStepDone as done:
            row = done.row
    i = len(curves["steps"]) - 1 if whole_fit else 0
    loss, metric = curves["loss"], curves["metric"]
    recorded = {f"train_{loss}": curves["train_loss"][i], f"val_{loss}": curves["val_loss"][i],
                f"val_{metric}": curves["val_metric"][i]}
    return check_reproducible(recorded, {k: row.get(k) for k in recorded},
                              tc.get("device"))


def _gpu_findings() -> list[Finding]:
    """GPU memory and utilisation on a CUDA machine; skipped elsewhere (without importing
    torch when no NVIDIA driver is present)."""
    if ("torch" not in sys.modules and not Path("/proc/driver/nvidia").exists()
            and shutil.which("nvidia-smi") is None):
        return [Finding("gpu", "skipped", "no CUDA device on this machine (no NVIDIA driver)")]
    try:
        import torch
    except ImportError:
        return [Finding("gpu", "skipped", "torch is not installed")]
    if not torch.cuda.is_available():
        return [Finding("gpu", "skipped", "no CUDA device on this machine")]
    free, total = torch.cuda.mem_get_info()
    evidence: dict[str, Any] = {"device": torch.cuda.get_device_name(0),
                                "memory_used_gib": (total - free) / 2**30,
                                "memory_total_gib": total / 2**30,
                                "peak_allocated_by_doctor_gib":
                                    torch.cuda.max_memory_allocated() / 2**30}
    try:
        evidence["utilisation_percent"] = torch.cuda.utilization()
    except Exception as exc:  # noqa: BLE001 - pynvml missing or no NVML: reported, not fatal
        evidence["utilisation_percent"] = f"unavailable ({type(exc).__name__})"
    used = (total - free) / total if total else 0.0
    severity = "warning" if used > 0.95 else "ok"
    return [Finding("gpu", severity, f"GPU memory {100 * used:.0f}% in use on "
                    f"{evidence['device']}.", evidence,
                    "Free memory: smaller batches, bf16, activation checkpointing, or stop "
                    "other processes on the device." if severity == "warning" else "")]
