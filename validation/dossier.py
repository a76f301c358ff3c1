"""An auditor's dossier of one model version: one self-contained folder, HTML and JSON.

``write_dossier(collect_dossier(model, verification, ...), out, ...)`` writes::

    index.html            the dossier page (no scripts, no external URL; every text escaped)
    dossier.json          everything on the page, machine-readable
    manifest.json         the version's manifest as stored
    history/<seq>/record.json   every history record, byte for byte (to verify offline)
    runs/<seq>/...        each validation run's scorecard, model card and figures, byte for byte
    trust/                the store's trust list (signed log, allowed_signers), when it has one
    SHA256SUMS            the sha256 of every other file, as ``sha256sum -c`` reads it

The page shows the model card, every scorecard, the history with who signed each record and
the verification results (with the chain head to pin: ``registry verify --head``), the lineage
to feature-group commits and training-dataset content hashes, and a table of what EU AI Act
Annex IV and SR 11-7 ask, each item pointing at the section that answers it or saying that
nothing does (:mod:`validation.audit_map`).

Everything is read from the version's files as they are, so a version that does not verify
still gets a dossier, one that says so: every copied evidence file is compared with the hash
its record names. Only ``verification`` (the caller's verify report) judges signatures and the
chain; the dossier shows it, never overrides it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fstrain.kernel.errors import InvalidArgumentError
from fstrain.kernel.timeutil import utc_now_iso
from model_registry.history import event_dir, sha256_bytes
from validation.audit_map import framework_rows

DOSSIER_VERSION = 1
DOSSIER_JSON = "dossier.json"
SUMS = "SHA256SUMS"
_SAFE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*$")


def collect_dossier(model: Any, verification: Mapping[str, Any], *,
                    versions: Sequence[Any] = (), trust_dir: Path | None = None,
                    generated_by: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The dossier of ``model`` (a registry model version) as a JSON-able dict, with the files
    to copy under ``"_copies"`` (dossier path → bytes).

    ``verification`` is the verify report to show (``ok``, ``problems``, ``head``, ...);
    ``versions`` the model's versions for the inventory; ``trust_dir`` the store's trust-list
    folder, whose signed log and ``allowed_signers`` are copied when there.
    """
    folder = Path(model.model_path)
    manifest, manifest_bytes = _read_json(folder / "manifest.json")
    manifest = manifest or {}
    copies: dict[str, bytes] = {}
    if manifest_bytes is not None:
        copies["manifest.json"] = manifest_bytes
    history, scorecards = [], []
    for seq in _event_numbers(folder, manifest):
        event, cards = _event(folder, seq, copies)
        history.append(event)
        scorecards += cards
    for name in ("log.jsonl", "allowed_signers"):
        if trust_dir is not None and (Path(trust_dir) / name).is_file():
            copies[f"trust/{name}"] = (Path(trust_dir) / name).read_bytes()
    problems = [str(p) for p in verification.get("problems") or []]
    for event in history:
        where = f"history/{event['seq']:04d}/"
        event["verification"] = [p for p in problems if p.startswith(where)]
    dossier: dict[str, Any] = {
        "dossier_version": DOSSIER_VERSION, "generated": utc_now_iso(),
        "generated_by": dict(generated_by or {}),
        "model": _identity(model, manifest),
        "verification": _verification(verification),
        "model_card": _model_card(folder, scorecards),
        "scorecards": scorecards, "history": history,
        "lineage": _lineage(manifest), "training": _training(manifest),
        "versions": [_version_row(v) for v in versions],
    }
    dossier["frameworks"] = framework_rows(dossier)
    dossier["_copies"] = copies
    return dossier


# ---------------------------------------------------------------------------- reading


def _read_json(path: Path) -> tuple[Any, bytes | None]:
    try:
        data = path.read_bytes()
    except OSError:
        return None, None
    try:
        return json.loads(data), data
    except ValueError:
        return None, data


def _event_numbers(folder: Path, manifest: Mapping[str, Any]) -> list[int]:
    """Every history event the manifest lists or the folder holds (a deleted or an added
    one shows, and the verification says which)."""
    seqs = set()
    for entry in manifest.get("files", []):
        parts = str(entry.get("path", "")).split("/")
        if len(parts) >= 3 and parts[0] == "history" and parts[1].isdigit():
            seqs.add(int(parts[1]))
    history = folder / "history"
    if history.is_dir():
        seqs |= {int(p.name) for p in history.iterdir() if p.is_dir() and p.name.isdigit()}
    return sorted(seqs)


def _event(folder: Path, seq: int, copies: dict[str, bytes]) -> tuple[dict[str, Any],
                                                                      list[dict[str, Any]]]:
    """One history event's row, its copies, and its scorecard summary for a validation run."""
    base = event_dir(seq)
    record, raw = _read_json(folder / base / "record.json")
    if raw is not None:
        copies[f"{base}/record.json"] = raw
    if not isinstance(record, dict):
        return {"seq": seq, "kind": None, "record_sha256": None if raw is None
                else sha256_bytes(raw), "problem": "record.json is missing or unreadable"}, []
    row = {k: record.get(k) for k in ("seq", "kind", "created", "user", "status", "reviewer",
                                      "note", "override_reason", "validation_seq",
                                      "failing_gates", "prev", "code_commit", "signer")}
    row.update(seq=seq, record_sha256=sha256_bytes(raw or b""),
               signed=bool(record.get("signature")), evidence=[])
    for rel, recorded in sorted((record.get("files") or {}).items()):
        row["evidence"].append(_copy_evidence(folder, base, seq, str(rel), recorded, copies))
    cards = []
    if record.get("kind") == "validation":
        card, _ = _read_json(folder / base / "scorecard.json")
        cards.append(_scorecard_summary(seq, record, card if isinstance(card, dict) else None,
                                        row["evidence"]))
    return row, cards


def _copy_evidence(folder: Path, base: str, seq: int, rel: str, recorded: Any,
                   copies: dict[str, bytes]) -> dict[str, Any]:
    """Copy one file a record covers to ``runs/<seq>/<rel>``, comparing it with its hash."""
    if not _SAFE.match(rel) or ".." in rel.split("/"):
        return {"path": rel, "copy": None, "recorded_sha256": recorded, "sha256": None,
                "state": "refused: not a plain relative path"}
    try:
        data = (folder / base / rel).read_bytes()
    except OSError:
        return {"path": rel, "copy": None, "recorded_sha256": recorded, "sha256": None,
                "state": "missing"}
    target = f"runs/{seq:04d}/{rel}"
    copies[target] = data
    sha = sha256_bytes(data)
    return {"path": rel, "copy": target, "recorded_sha256": recorded, "sha256": sha,
            "state": "matches its record" if sha == recorded else "CHANGED since its record"}


def _scorecard_summary(seq: int, record: Mapping[str, Any], card: Mapping[str, Any] | None,
                       evidence: list[dict[str, Any]]) -> dict[str, Any]:
    copies = {e["path"]: e["copy"] for e in evidence if e["copy"]}
    summary: dict[str, Any] = {
        "run": seq, "created": record.get("created"), "status": record.get("status"),
        "failing_gates": record.get("failing_gates") or [],
        "replaced_default_gates": record.get("replaced_default_gates"),
        "scorecard_html": copies.get("scorecard.html"),
        "model_card_html": copies.get("model_card.html"),
        "unchanged": all(e["state"] == "matches its record" for e in evidence),
    }
    if card is None:
        return {**summary, "metrics": {}, "gates": [], "slices": 0, "evaluation": {}}
    metrics = card.get("metrics") or {}
    intervals = card.get("confidence_intervals") or {}
    summary["metrics"] = {
        k: {"value": v, "lower": (intervals.get(k) or {}).get("lower"),
            "upper": (intervals.get(k) or {}).get("upper")}
        for k, v in metrics.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
        and k not in ("n", "positives", "negatives")}
    summary["gates"] = [{k: g.get(k) for k in ("name", "status", "value", "source")}
                        for g in (card.get("gates") or {}).get("results", [])]
    summary["slices"] = len((card.get("bias") or {}).get("slices") or [])
    summary["evaluation"] = dict(card.get("evaluation") or {})
    summary["gate_selection"] = card.get("gate_selection")
    return summary


def _model_card(folder: Path, scorecards: list[dict[str, Any]]) -> dict[str, Any]:
    """The latest run's model card: its copy, and its content from the run's
    ``model_card.json`` (sections with the generated findings and the owner's texts apart,
    completeness, contradictions) or, for a run recorded without one, its sections read from
    the page."""
    latest = next((s for s in reversed(scorecards) if s.get("model_card_html")), None)
    if latest is None:
        return {"run": None, "html": None, "sections": []}
    base = folder / "history" / f"{latest['run']:04d}"
    card, _ = _read_json(base / "model_card.json")
    out: dict[str, Any] = {"run": latest["run"], "html": latest["model_card_html"]}
    if isinstance(card, dict) and isinstance(card.get("sections"), list):
        keep = ("completeness", "missing", "contradictions", "owner", "status", "date")
        return {**out, **{k: card.get(k) for k in keep}, "sections": card["sections"]}
    from validation.dossier_html import card_sections

    try:
        sections = card_sections((base / "model_card.html").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        sections = []
    return {**out, "sections": sections}


def _identity(model: Any, manifest: Mapping[str, Any]) -> dict[str, Any]:
    trainer = ((manifest.get("training_config") or {}).get("trainer") or {})
    code = manifest.get("code_version") or {}
    return {"name": model.name, "version": model.version,
            "framework": manifest.get("framework"), "model": trainer.get("model"),
            "loader": (manifest.get("predictor") or {}).get("loader"),
            "description": manifest.get("description"), "created": manifest.get("created"),
            "validation_status": manifest.get("validation_status"),
            "libraries": manifest.get("libraries") or {},
            "fstrain_version": code.get("fstrain_version"),
            "source_commit": manifest.get("git_commit"),
            "backend": manifest.get("backend", "local"),
            "input_schema": (manifest.get("model_schema") or {}).get("input_schema"),
            "unsafe_files": manifest.get("unsafe_files") or [],
            "files": len(manifest.get("files") or [])}


def _verification(report: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(report)
    out["ok"] = bool(report.get("ok"))
    out["problems"] = [str(p) for p in report.get("problems") or []]
    return out


def _lineage(manifest: Mapping[str, Any]) -> dict[str, Any]:
    lineage = manifest.get("lineage") or {}
    td = lineage.get("training_dataset") or {}
    return {
        "feature_view": lineage.get("feature_view"),
        "training_dataset_version": lineage.get("training_dataset_version"),
        "feature_group_commits": td.get("feature_group_commits") or {},
        "split": td.get("split_spec") or {}, "seed": td.get("seed"),
        "content_hash": td.get("content_hash"), "created_at": td.get("created_at"),
        "data_format": td.get("data_format"), "type": td.get("type"),
        "splits": {name: {k: (s or {}).get(k) for k in ("rows", "sha256", "file_sha256",
                                                        "label_distribution")}
                   for name, s in (td.get("splits") or {}).items()},
        "query_sql": td.get("query_sql"),
    }


def _training(manifest: Mapping[str, Any]) -> dict[str, Any]:
    config = manifest.get("training_config") or {}
    return {"trainer": config.get("trainer"), "hyperparameters": manifest.get("hyperparameters"),
            "metrics": manifest.get("metrics") or {},
            **{k: config.get(k) for k in ("tuning", "cross_validation", "imbalance",
                                          "validation_split", "device", "distributed",
                                          "timings", "best_iteration", "nondeterminism")}}


def _version_row(model: Any) -> dict[str, Any]:
    return {"version": model.version, "training_dataset_version": model.training_dataset_version,
            "validation_status": model.validation_status, "created": str(model.created or "")}


# ---------------------------------------------------------------------------- writing


def check_out_folder(out: Path, *, store_roots: Sequence[Path], force: bool) -> Path:
    """The resolved ``out`` folder, refused (InvalidArgumentError, nothing written) when it lies
    inside a store root or is an existing non-empty folder without ``force``."""
    target = Path(out).expanduser().resolve()
    for root in store_roots:
        root = Path(root).expanduser().resolve()
        if target == root or root in target.parents:
            raise InvalidArgumentError(
                f"dossier --out {out} is inside the store at {root}: a dossier is a copy for "
                "an auditor and must not be written into the registry it describes. Choose a "
                "folder outside the store.")
    if target.exists() and not target.is_dir():
        raise InvalidArgumentError(f"dossier --out {out} is a file, not a folder. Choose a "
                                   "new or empty folder.")
    if target.is_dir() and any(target.iterdir()) and not force:
        raise InvalidArgumentError(
            f"dossier --out {out} is not empty. Choose a new or empty folder, or pass --force "
            "to write the dossier into it (an earlier dossier there is replaced; other files "
            "are left alone).")
    return target


def write_dossier(dossier: Mapping[str, Any], out: Path, *, store_roots: Sequence[Path],
                  force: bool = False) -> Path:
    """Write the folder (see the module docstring); returns the path of ``index.html``.

    The files are written into a staging folder beside ``out`` and moved into place, so a
    failure leaves ``out`` as it was.
    """
    from validation.dossier_html import render_dossier

    target = check_out_folder(out, store_roots=store_roots, force=force)
    files: dict[str, bytes] = dict(dossier.get("_copies") or {})
    data = {k: v for k, v in dossier.items() if k != "_copies"}
    files["index.html"] = render_dossier(data).encode("utf-8")
    data["files"] = {p: sha256_bytes(b) for p, b in sorted(files.items())}
    files[DOSSIER_JSON] = (json.dumps(data, indent=2, sort_keys=True, default=str)
                           + "\n").encode("utf-8")
    files[SUMS] = "".join(f"{sha256_bytes(b)}  {p}\n"
                          for p, b in sorted(files.items())).encode("utf-8")
    for rel in files:
        if not _SAFE.match(rel):
            raise InvalidArgumentError(f"dossier file name {rel!r} is not a plain relative "
                                       "path; nothing was written.")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".dossier-", dir=target.parent))
    try:
        for rel, content in files.items():
            (staging / rel).parent.mkdir(parents=True, exist_ok=True)
            (staging / rel).write_bytes(content)
        _move_into_place(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target / "index.html"


def _move_into_place(staging: Path, target: Path) -> None:
    if not target.exists() or (target.is_dir() and not any(target.iterdir())):
        if target.exists():
            target.rmdir()
        os.rename(staging, target)
        return
    previous, _ = _read_json(target / DOSSIER_JSON)
    for rel in (previous or {}).get("files", {}) if isinstance(previous, dict) else {}:
        if _SAFE.match(rel):
            (target / rel).unlink(missing_ok=True)
    for path in sorted(p for p in staging.rglob("*") if p.is_file()):
        dest = target / path.relative_to(staging)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if target not in dest.resolve().parents:  # a link in the old folder pointing out
            raise InvalidArgumentError(f"dossier --out {target}: {dest} leads outside the "
                                       "folder (a symbolic link); choose a new folder.")
        os.replace(path, dest)
