"""The effective trainer configuration, shown where a user meets it: ``fstrain train
--show-config`` (before training) and ``fstrain registry show`` (what a version was trained with,
and where that differs from its use case's defaults, e.g. the overrides ``fstrain demo`` uses)."""

from __future__ import annotations

from typing import Any

import yaml
from feature_views import USE_CASES, get_use_case
from feature_views import get_use_case

#: The trainer settings a person compares (the rest are engine details, in ``--json``).
SHOWN = ("model", "params", "seed", "imbalance", "metric", "early_stopping_rounds")


def flat(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"params": {"n_estimators": 150}}`` as ``{"params.n_estimators": 150}``."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def listed(values: dict[str, Any]) -> str:
    """``a=1, b=2``."""
    return ", ".join(f"{k}={v}" for k, v in values.items())


def show_config(use_case_name: str, overrides: dict[str, Any], model_name: str | None) -> tuple[dict[str, Any], str]:
    """``train --show-config``: the JSON payload and the text (YAML) of the trainer
    configuration the run would use, with the overrides ``fstrain demo`` applies to it."""
    from pipelines import training

    use_case = get_use_case(use_case_name)
    trainer = training.trainer_config(use_case, overrides).model_dump(mode="json")
    demo = use_case.demo.get("model") or {}
    payload = {"use_case": use_case_name,
               "model_name": model_name or use_case.registry_model_name,
               "trainer": trainer, "demo_overrides": demo}
    text = yaml.safe_dump({"trainer": trainer}, sort_keys=False).rstrip()
    if demo:
        text += (f"\n# fstrain demo trains {use_case_name} with {listed(flat(demo))} over this "
                 "(fstrain train and fstrain run do not)")
    return payload, text


def trained_with(manifest: dict[str, Any]) -> dict[str, Any]:
    """What a registered version was trained with (:data:`SHOWN` of its trainer config) and
    each setting that differs from its use case's defaults (``differs``: name → [default,
    used])."""
    trainer = ((manifest.get("training_config") or {}).get("trainer")) or {}
    shown = {k: trainer[k] for k in SHOWN if k in trainer}
    defaults = _defaults(manifest.get("feature_view_name"), trainer)
    differs: dict[str, list[Any]] = {}
    if defaults is not None:
        used, base = flat(shown), flat({k: defaults.get(k) for k in SHOWN if k in defaults})
        differs = {k: [base.get(k), v] for k, v in used.items() if base.get(k) != v}
    return {"trainer": shown, "differs_from_use_case": differs}


def config_line(summary: dict[str, Any]) -> str:
    """One line for ``registry show``: the settings, then what differs from the defaults."""
    line = "trained with: " + (listed(flat(summary["trainer"])) or "-")
    differs = summary["differs_from_use_case"]
    if differs:
        line += ("\n  differs from the use case's defaults: " +
                 ", ".join(f"{k}={used} (default {default})"
                           for k, (default, used) in differs.items()))
    return line


def _defaults(feature_view: str | None, trainer: dict[str, Any]) -> dict[str, Any] | None:
    """The trainer config of the use case whose view is ``feature_view`` (None: no such use
    case, or the version trained another model kind than the default)."""
    from pipelines import training

    for name in USE_CASES:
        use_case = get_use_case(name)
        if use_case.feature_view_name == feature_view:
            if trainer.get("model") not in (None, use_case.model.get("model")):
                return None
            return dict(training.trainer_config(use_case, {}).model_dump(mode="json"))
    return None


__all__ = ["config_line", "flat", "show_config", "trained_with"]
