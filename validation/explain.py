"""SHAP explanations of a trained model on a bounded, seeded sample of evaluation rows.

Which explainer runs depends on the model:

==========================================  ==================================================
model                                       method (recorded in ``Explanation.method``)
==========================================  ==================================================
XGBoost ``Booster`` / sklearn wrapper       ``xgboost pred_contribs`` — exact TreeSHAP inside
                                            XGBoost, in margin (log-odds) space; shap is not
                                            imported
LightGBM ``Booster`` / sklearn wrapper      ``lightgbm pred_contrib`` — the same, inside
                                            LightGBM
CatBoost model                              ``catboost ShapValues`` — CatBoost's own SHAP
                                            values (``get_feature_importance``) on the raw
                                            columns, categoricals native, in log-odds space
other tree ensembles (sklearn forests and   ``shap.TreeExplainer`` on the raw model output
gradient boosting)
PyTorch ``nn.Module``                       ``shap.DeepExplainer`` (DeepLIFT-SHAP) against a
                                            background sample; if it fails or its additivity
                                            check fails, exact-path *integrated gradients* from
                                            the background mean (named as such)
anything with ``predict_proba``/``predict`` ``shap.KernelExplainer`` (Kernel SHAP) over the
(e.g. an sklearn ``Pipeline``)              prediction function with a background sample: it
                                            enumerates every coalition while ``2**p - 2`` fits
                                            its sample budget (exact Shapley values under
                                            independent masking), and stays additive beyond;
                                            ``method="permutation"`` uses ``shap.Explainer``
                                            with an ``Independent`` masker instead (its numba
                                            kernels take ~10 s to compile once per process)
==========================================  ==================================================

Non-numeric columns (strings, categories, booleans) are masked as category codes and decoded
back before the model is called, since shap's maskers only handle numbers.

In every case ``values.sum(axis=1) + expected_value`` reproduces the explained output of each
row (up to numerical tolerance, and for integrated gradients up to the quadrature error),
where ``expected_value`` is the output at the background (for integrated gradients: the output
at the background mean).

shap and torch are imported only when needed; nothing here touches a global RNG.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from fstrain.kernel.errors import InvalidArgumentError


@dataclass(frozen=True)
class Explanation:
    """Per-row SHAP values of a sample of rows.

    Attributes:
        feature_names: one name per column of ``values``.
        values: ``(n_rows, n_features)`` SHAP values.
        expected_value: the base value the values add up from.
        data: ``(n_rows, n_features)`` feature values of the explained rows (for dot plots;
            non-numeric columns are stored as category codes).
        row_index: positions of the explained rows in the ``X`` passed to :func:`explain`.
        method: the explainer used (see the module table).
        output: what is explained, e.g. ``"margin (log-odds)"`` or ``"P(class=1)"``.
        note: anything a reviewer should know (fallbacks, sampling).
    """

    feature_names: tuple[str, ...]
    values: np.ndarray
    expected_value: float
    data: np.ndarray
    row_index: np.ndarray
    method: str
    output: str
    note: str = ""

    def global_importance(self) -> list[tuple[str, float]]:
        """Mean |SHAP| per feature over the explained rows, most important first."""
        imp = np.abs(self.values).mean(axis=0)
        order = sorted(range(len(imp)), key=lambda i: (-imp[i], self.feature_names[i]))
        return [(self.feature_names[i], float(imp[i])) for i in order]

    def to_dict(self, *, include_rows: bool = False) -> dict[str, Any]:
        """JSON-serialisable summary (global importance; per-row values only when asked)."""
        out: dict[str, Any] = {
            "method": self.method,
            "output": self.output,
            "expected_value": float(self.expected_value),
            "n_rows": int(self.values.shape[0]),
            "note": self.note,
            "global_importance": [
                {"feature": f, "mean_abs_shap": v} for f, v in self.global_importance()
            ],
        }
        if include_rows:
            out["feature_names"] = list(self.feature_names)
            out["row_index"] = [int(i) for i in self.row_index]
            out["values"] = np.asarray(self.values, dtype=float).tolist()
        return out


def readable_name(encoded: str, columns: Sequence[str]) -> tuple[str, str | None]:
    """The original column and category of a preprocessed feature name: ``cat__city_oslo`` →
    ``("city", "oslo")``, ``num__age`` → ``("age", None)``; unknown names map to themselves.
    The longest matching column name wins (``age`` vs ``age_band``)."""
    base = encoded.split("__", 1)[1] if "__" in encoded else encoded
    for column in sorted(columns, key=len, reverse=True):
        if base == column:
            return column, None
        if base.startswith(column + "_"):
            category = base[len(column) + 1:]
            return column, "(missing)" if category == "__missing__" else category
    return base, None


def readable_names(explanation: Explanation, columns: Sequence[str]) -> Explanation:
    """The same explanation with reader-facing feature names (``city = oslo``, ``age``)."""
    names = []
    for name in explanation.feature_names:
        column, category = readable_name(name, columns)
        names.append(column if category is None else f"{column} = {category}")
    return replace(explanation, feature_names=tuple(names))


def by_column(explanation: Explanation, columns: Sequence[str], *, top_k: int = 15
              ) -> list[dict[str, Any]]:
    """Importance per *original* column: the SHAP values of the encoded features that come from
    one column (one-hot categories, indicators) are summed per row before the mean |.|, so a
    column's share is not split over its categories. Each entry lists its top categories with
    readable names (``city = oslo``); at most ``top_k`` columns, most important first."""
    groups: dict[str, list[int]] = {}
    labels: list[str] = []
    for i, name in enumerate(explanation.feature_names):
        column, category = readable_name(name, columns)
        groups.setdefault(column, []).append(i)
        labels.append(column if category is None else f"{column} = {category}")
    per_feature = np.abs(explanation.values).mean(axis=0)
    out = []
    for column, idx in groups.items():
        total = float(np.abs(explanation.values[:, idx].sum(axis=1)).mean())
        members = sorted(idx, key=lambda i: -per_feature[i])
        out.append({"column": column, "mean_abs_shap": total, "encoded_features": len(idx),
                    "top_features": [{"feature": labels[i], "mean_abs_shap": float(per_feature[i])}
                                     for i in members[:3] if per_feature[i] > 0]})
    out.sort(key=lambda g: (-g["mean_abs_shap"], g["column"]))
    return out[:top_k]


def sample_rows(n_rows: int, max_samples: int, seed: int) -> np.ndarray:
    """Sorted positions of at most ``max_samples`` of ``n_rows`` rows, drawn without replacement."""
    if max_samples < 1:
        raise InvalidArgumentError(f"max_samples must be >= 1. Got {max_samples!r} instead.")
    if n_rows <= max_samples:
        return np.arange(n_rows)
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n_rows, size=max_samples, replace=False))


def _take(X: Any, idx: np.ndarray) -> Any:
    if isinstance(X, pd.DataFrame):
        return X.iloc[idx]
    return X[idx]


def _names(X: Any, feature_names: Sequence[str] | None, n_features: int) -> tuple[str, ...]:
    if feature_names is not None:
        names = tuple(str(f) for f in feature_names)
    elif isinstance(X, pd.DataFrame):
        names = tuple(str(c) for c in X.columns)
    else:
        names = tuple(f"f{i}" for i in range(n_features))
    if len(names) != n_features:
        raise InvalidArgumentError(
            f"feature_names has {len(names)} names, but the model input has {n_features} "
            "features."
        )
    return names


def _pick_output(values: np.ndarray, base: Any, class_index: int | None,
                 what: str) -> tuple[np.ndarray, float, int | None]:
    """Reduce a multi-output explanation ``(n, p, k)`` to one output."""
    base_arr = np.atleast_1d(np.asarray(base, dtype=float))
    if values.ndim == 2:
        return values, float(base_arr.ravel()[0]), None
    k = values.shape[-1]
    if class_index is None:
        if k == 2:
            class_index = 1
        elif k == 1:
            class_index = 0
        else:
            raise InvalidArgumentError(
                f"The {what} has {k} outputs; pass class_index=0..{k - 1} to choose the one "
                "to explain."
            )
    if not 0 <= class_index < k:
        raise InvalidArgumentError(f"class_index must be in 0..{k - 1}. Got {class_index!r}.")
    b = base_arr[class_index] if base_arr.size == k else base_arr.ravel()[0]
    return values[..., class_index], float(b), class_index


def _is_xgboost(model: Any) -> bool:
    return type(model).__module__.startswith("xgboost") and (
        hasattr(model, "get_booster") or type(model).__name__ == "Booster"
    )


def _is_lightgbm(model: Any) -> bool:
    return type(model).__module__.startswith("lightgbm") and (
        hasattr(model, "booster_") or type(model).__name__ == "Booster"
    )


def _is_catboost(model: Any) -> bool:
    return type(model).__module__.startswith("catboost") and hasattr(model, "get_cat_feature_indices")


def _is_torch(model: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(model, torch.nn.Module)


def _is_tree(model: Any) -> bool:
    mod = type(model).__module__
    name = type(model).__name__
    if mod.startswith("lightgbm"):
        return True
    return mod.startswith("sklearn.ensemble") and any(
        k in name for k in ("Forest", "Trees", "GradientBoosting")
    ) or mod.startswith("sklearn.tree")


def explain(
    model: Any,
    X: Any,
    *,
    feature_names: Sequence[str] | None = None,
    max_samples: int = 200,
    background_size: int = 100,
    seed: int = 0,
    class_index: int | None = None,
    method: str = "auto",
) -> Explanation:
    """Explain ``model`` on at most ``max_samples`` rows of ``X`` (drawn with ``seed``).

    Args:
        model: a trained model (see the module docstring for what is supported).
        X: the *transformed* feature values the model takes (DataFrame, ndarray, or for torch
            also a tensor; extra dimensions, e.g. images, are flattened into features).
        feature_names: names of the features (default: DataFrame columns or ``f0..``).
        max_samples: explain at most this many rows.
        background_size: rows of ``X`` used as background for shap/torch explainers.
        seed: seed of the row sample and the background sample.
        class_index: for multi-output models, the output to explain (default: class 1 of a
            binary classifier; required for more than two outputs).
        method: ``"auto"``, or force ``"xgboost"``, ``"lightgbm"``, ``"tree"``, ``"deep"``,
            ``"integrated_gradients"``, ``"generic"`` (Kernel SHAP) or ``"permutation"``.

    Returns:
        An :class:`Explanation`.
    """
    known = ("auto", "xgboost", "lightgbm", "catboost", "tree", "deep", "integrated_gradients", "generic",
             "permutation", "linear")
    if method not in known:
        raise InvalidArgumentError(f"method must be one of {known}. Got {method!r} instead.")
    n = len(X)
    if n == 0:
        raise InvalidArgumentError("X has no rows to explain.")
    idx = sample_rows(n, max_samples, seed)
    bg_idx = sample_rows(n, background_size, seed + 1)
    if method == "auto":
        if _is_xgboost(model):
            method = "xgboost"
        elif _is_lightgbm(model):
            method = "lightgbm"
        elif _is_catboost(model):
            method = "catboost"
        elif _is_torch(model):
            method = "deep"
        elif _is_tree(model):
            method = "tree"
        else:
            method = "generic"
    if method == "xgboost":
        return _explain_xgboost(model, X, idx, feature_names, class_index)
    if method == "lightgbm":
        return _explain_lightgbm(model, X, idx, feature_names, class_index)
    if method == "catboost":
        return _explain_catboost(model, X, idx, feature_names, class_index)
    if method in ("deep", "integrated_gradients"):
        return _explain_torch(model, X, idx, bg_idx, feature_names, class_index,
                              force_ig=method == "integrated_gradients")
    if method == "tree":
        return _explain_tree(model, X, idx, feature_names, class_index)
    if method == "linear":
        return _explain_linear(model, X, idx, bg_idx, feature_names, class_index)
    return _explain_generic(model, X, idx, bg_idx, feature_names, class_index,
                            permutation=method == "permutation")


# --------------------------------------------------------------------------------------------
# XGBoost: exact TreeSHAP through pred_contribs
# --------------------------------------------------------------------------------------------

def _explain_xgboost(model: Any, X: Any, idx: np.ndarray, feature_names: Sequence[str] | None,
                     class_index: int | None) -> Explanation:
    import xgboost as xgb

    booster = model.get_booster() if hasattr(model, "get_booster") else model
    sample = _take(X, idx)
    dm = xgb.DMatrix(sample, enable_categorical=isinstance(sample, pd.DataFrame))
    contribs = np.asarray(booster.predict(dm, pred_contribs=True, validate_features=False))
    if contribs.ndim == 3:  # (n, k, p + 1) for multi-class
        contribs = np.transpose(contribs, (0, 2, 1))  # → (n, p + 1, k)
        values_all, bias_all = contribs[:, :-1, :], contribs[0, -1, :]
        values, base, ci = _pick_output(values_all, bias_all, class_index, "XGBoost model")
        output = f"margin of class {ci}"
    else:
        values, base = contribs[:, :-1], float(contribs[0, -1])
        objective = _xgb_objective(booster)
        output = "margin (log-odds)" if objective.startswith("binary:logistic") else (
            f"margin ({objective})" if objective else "margin")
    names = _names(X, feature_names or booster.feature_names, values.shape[1])
    data = _numeric_data(sample)
    return Explanation(names, values.astype(float), base, data, idx,
                       "xgboost pred_contribs (exact TreeSHAP)", output)


def _xgb_objective(booster: Any) -> str:
    try:
        cfg = json.loads(booster.save_config())
        return str(cfg["learner"]["objective"]["name"])
    except Exception:  # noqa: BLE001 - objective is only used for a label
        return ""


# --------------------------------------------------------------------------------------------
# LightGBM: exact TreeSHAP through pred_contrib
# --------------------------------------------------------------------------------------------

def _explain_lightgbm(model: Any, X: Any, idx: np.ndarray, feature_names: Sequence[str] | None,
                      class_index: int | None) -> Explanation:
    booster = model.booster_ if hasattr(model, "booster_") else model
    sample = _take(X, idx)
    contribs = np.asarray(booster.predict(sample, pred_contrib=True), dtype=float)
    n_outputs = max(1, int(booster.num_model_per_iteration()))
    p = contribs.shape[1] // n_outputs - 1
    if n_outputs > 1:  # (n, k * (p + 1)), one block per class
        blocks = contribs.reshape(len(contribs), n_outputs, p + 1).transpose(0, 2, 1)
        values, base, ci = _pick_output(blocks[:, :-1, :], blocks[0, -1, :], class_index,
                                        "LightGBM model")
        output = f"raw score of class {ci}"
    else:
        values, base = contribs[:, :-1], float(contribs[0, -1])
        objective = str(booster.params.get("objective", "")) if booster.params else ""
        output = "raw score (log-odds)" if objective == "binary" else (
            f"raw score ({objective})" if objective else "raw score")
    names = _names(X, feature_names or booster.feature_name(), values.shape[1])
    return Explanation(names, values.astype(float), base, _numeric_data(sample), idx,
                       "lightgbm pred_contrib (exact TreeSHAP)", output)


# --------------------------------------------------------------------------------------------
# CatBoost: its own SHAP values (categorical features native)
# --------------------------------------------------------------------------------------------

def _explain_catboost(model: Any, X: Any, idx: np.ndarray, feature_names: Sequence[str] | None,
                      class_index: int | None) -> Explanation:
    import catboost

    sample = _take(X, idx)
    pool = catboost.Pool(sample, cat_features=list(model.get_cat_feature_indices()))
    contribs = np.asarray(model.get_feature_importance(data=pool, type="ShapValues"), dtype=float)
    if contribs.ndim == 3:  # (n, k, p + 1) for multi-class
        contribs = np.transpose(contribs, (0, 2, 1))
        values, base, ci = _pick_output(contribs[:, :-1, :], contribs[0, -1, :], class_index,
                                        "CatBoost model")
        output = f"raw score of class {ci}"
    else:
        values, base, output = contribs[:, :-1], float(contribs[0, -1]), "raw score (log-odds)"
    names = _names(X, feature_names or model.feature_names_, values.shape[1])
    return Explanation(names, values, base, _numeric_data(sample), idx,
                       "catboost ShapValues (CatBoost's own TreeSHAP)", output,
                       note="categorical features explained as whole columns (no one-hot)")


# --------------------------------------------------------------------------------------------
# other tree models: shap.TreeExplainer
# --------------------------------------------------------------------------------------------

def _explain_tree(model: Any, X: Any, idx: np.ndarray, feature_names: Sequence[str] | None,
                  class_index: int | None) -> Explanation:
    import shap

    sample = _take(X, idx)
    explainer = shap.TreeExplainer(model)
    sv = explainer.shap_values(sample)
    values = np.stack(sv, axis=-1) if isinstance(sv, list) else np.asarray(sv)  # list: old shap
    values, base, ci = _pick_output(values, explainer.expected_value, class_index,
                                    type(model).__name__)
    output = "raw model output" if ci is None else f"raw model output for class {ci}"
    names = _names(X, feature_names, values.shape[1])
    return Explanation(names, values.astype(float), base, _numeric_data(sample), idx,
                       "shap.TreeExplainer", output)


# --------------------------------------------------------------------------------------------
# linear models: exact SHAP values in closed form
# --------------------------------------------------------------------------------------------

def _explain_linear(model: Any, X: Any, idx: np.ndarray, bg_idx: np.ndarray,
                    feature_names: Sequence[str] | None, class_index: int | None
                    ) -> Explanation:
    """Linear SHAP with independent features: ``coef_j * (x_j - mean_j)`` in margin space,
    the mean taken over the background rows (what ``shap.LinearExplainer`` computes for an
    independent masker), without sampling, so it costs one matrix product."""
    coef = np.atleast_2d(np.asarray(getattr(model, "coef_", None), dtype=float))
    if coef.size == 0 or not hasattr(model, "intercept_"):
        raise InvalidArgumentError(
            f"Cannot explain a {type(model).__name__} as a linear model: it has no coef_ and "
            "intercept_."
        )
    row = 0 if coef.shape[0] == 1 else (class_index if class_index is not None else 1)
    data = np.asarray(_take(X, np.arange(len(X))) if isinstance(X, pd.DataFrame) else X,
                      dtype=float)
    mean = data[bg_idx].mean(axis=0)
    sample = data[idx]
    values = (sample - mean) * coef[row]
    base = float(np.atleast_1d(model.intercept_)[row] + mean @ coef[row])
    names = _names(X, feature_names, values.shape[1])
    return Explanation(names, values, base, sample, idx,
                       f"linear SHAP (closed form, {len(bg_idx)} background rows)",
                       "margin (log-odds)")


# --------------------------------------------------------------------------------------------
# generic: shap.Explainer over the prediction function
# --------------------------------------------------------------------------------------------

def _explain_generic(model: Any, X: Any, idx: np.ndarray, bg_idx: np.ndarray,
                     feature_names: Sequence[str] | None,
                     class_index: int | None, *, permutation: bool) -> Explanation:
    import shap

    frame = X if isinstance(X, pd.DataFrame) else pd.DataFrame(np.asarray(X))
    columns = list(frame.columns)
    # shap maskers need numbers: encode non-numeric columns as category codes, decode in f
    codes: dict[Any, pd.Index] = {}
    encoded = pd.DataFrame(index=frame.index)
    for c in columns:
        if pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c]):
            encoded[c] = frame[c].astype(float)
        else:
            cat = pd.Categorical(frame[c])
            codes[c] = cat.categories
            encoded[c] = cat.codes.astype(float)

    def decode(a: np.ndarray) -> Any:
        df = pd.DataFrame(a, columns=columns)
        for c, cats in codes.items():
            ci = df[c].round().astype(int).to_numpy()
            df[c] = pd.Series(np.where(ci >= 0, cats.take(np.clip(ci, 0, None)), None),
                              dtype=frame[c].dtype if frame[c].dtype != bool else object)
        for c in columns:
            if c not in codes:
                df[c] = df[c].astype(frame[c].dtype)
        return df if isinstance(X, pd.DataFrame) else df.to_numpy()

    if hasattr(model, "predict_proba"):
        proba = np.asarray(model.predict_proba(_take(X, idx[:1])))
        k = proba.shape[1]
        ci = class_index if class_index is not None else (1 if k == 2 else None)
        if ci is None or not 0 <= ci < k:
            raise InvalidArgumentError(
                f"The model has {k} classes; pass class_index=0..{k - 1} to choose one."
            )

        def f(a: np.ndarray) -> np.ndarray:
            return np.asarray(model.predict_proba(decode(a)))[:, ci]

        output = f"P(class={ci})"
    elif hasattr(model, "predict"):
        def f(a: np.ndarray) -> np.ndarray:
            return np.asarray(model.predict(decode(a)), dtype=float).ravel()

        output = "prediction"
    else:
        raise InvalidArgumentError(
            f"Cannot explain a {type(model).__name__}: it is not an XGBoost, tree or PyTorch "
            "model and has neither predict_proba nor predict."
        )
    values_np = encoded.to_numpy()
    p = len(columns)
    names = _names(frame, feature_names, p)
    note = "non-numeric columns masked as category codes" if codes else ""
    if permutation:
        masker = shap.maskers.Independent(values_np[bg_idx], max_samples=len(bg_idx))
        explainer = shap.Explainer(f, masker, algorithm="permutation", seed=0)
        result = explainer(values_np[idx], max_evals=max(2 * p + 1, 500), silent=True)
        values = np.asarray(result.values, dtype=float)
        base = float(np.ravel(result.base_values)[0])
        method = f"shap.PermutationExplainer (Independent masker, {len(bg_idx)} background rows)"
    else:
        explainer = shap.KernelExplainer(f, values_np[bg_idx])
        nsamples = 2 * p + 2048
        values = np.asarray(explainer.shap_values(values_np[idx], nsamples=nsamples,
                                                  l1_reg=False, silent=True), dtype=float)
        base = float(np.ravel(explainer.expected_value)[0])
        exact = 2**p - 2 <= nsamples
        method = (f"shap.KernelExplainer ({len(bg_idx)} background rows, "
                  f"{'all coalitions: exact' if exact else f'{nsamples} sampled coalitions'})")
    return Explanation(names, values.reshape(len(idx), p), base, values_np[idx], idx, method,
                       output, note=note)


# --------------------------------------------------------------------------------------------
# PyTorch: DeepExplainer, integrated-gradients fallback
# --------------------------------------------------------------------------------------------

def _explain_torch(model: Any, X: Any, idx: np.ndarray, bg_idx: np.ndarray,
                   feature_names: Sequence[str] | None, class_index: int | None,
                   *, force_ig: bool) -> Explanation:
    import torch

    if isinstance(X, pd.DataFrame):
        full = torch.as_tensor(X.to_numpy(dtype=np.float32))
    else:
        full = torch.as_tensor(np.asarray(X.detach().cpu() if hasattr(X, "detach") else X,
                                          dtype=np.float32))
    sample, background = full[idx], full[bg_idx]
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = model(sample[:1])
        k = 1 if out.ndim == 1 else int(out.shape[-1])
        if k > 1 and class_index is None:
            raise InvalidArgumentError(
                f"The PyTorch model has {k} outputs; pass class_index=0..{k - 1} to choose one."
            )
        ci = 0 if class_index is None else class_index
        if not 0 <= ci < k:
            raise InvalidArgumentError(f"class_index must be in 0..{k - 1}. Got {class_index!r}.")
        head = _Head(model, ci, flat=out.ndim == 1)
        output = "raw network output" + (f" {ci}" if k > 1 else "")
        note = ""
        if not force_ig:
            try:
                import shap

                explainer = shap.DeepExplainer(head, background)
                sv = explainer.shap_values(sample, check_additivity=True)
                values = np.asarray(sv, dtype=float).reshape(len(sample), -1)
                base = float(np.ravel(explainer.expected_value)[0])
                method = f"shap.DeepExplainer ({len(bg_idx)} background rows)"
                names = _names(X, feature_names, values.shape[1])
                return Explanation(names, values, base, sample.reshape(len(sample), -1).numpy(),
                                   idx, method, output)
            except InvalidArgumentError:
                raise
            except Exception as exc:  # noqa: BLE001 - any shap failure → documented fallback
                note = f"shap.DeepExplainer failed ({type(exc).__name__}: {exc}); fell back"
        values, base = _integrated_gradients(head, sample, background.mean(dim=0, keepdim=True))
        names = _names(X, feature_names, values.shape[1])
        return Explanation(names, values, base, sample.reshape(len(sample), -1).numpy(), idx,
                           "integrated gradients from the background mean (256-step "
                           "trapezoid rule)", output, note=note)
    finally:
        model.train(was_training)


def _Head(model: Any, index: int, *, flat: bool) -> Any:
    """Wrap ``model`` so it returns the chosen output as an ``(n, 1)`` tensor."""
    import torch

    class Head(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, x: Any) -> Any:
            y = self.inner(x)
            return y.reshape(-1, 1) if flat else y[:, index:index + 1]

    return Head().eval()


def _integrated_gradients(head: Any, x: Any, baseline: Any, steps: int = 256
                          ) -> tuple[np.ndarray, float]:
    import torch

    alphas = torch.linspace(0.0, 1.0, steps + 1)
    weights = torch.full((steps + 1,), 1.0 / steps)
    weights[0] = weights[-1] = 0.5 / steps
    total = torch.zeros_like(x)
    for a, w in zip(alphas, weights):
        point = (baseline + a * (x - baseline)).detach().requires_grad_(True)
        out = head(point).sum()
        (grad,) = torch.autograd.grad(out, point)
        total += w * grad
    attributions = ((x - baseline) * total).reshape(len(x), -1).detach().numpy().astype(float)
    with torch.no_grad():
        base = float(head(baseline).reshape(-1)[0])
    return attributions, base


def _numeric_data(sample: Any) -> np.ndarray:
    if isinstance(sample, pd.DataFrame):
        cols = []
        for c in sample.columns:
            s = sample[c]
            if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
                cols.append(s.to_numpy(dtype=float))
            else:
                cols.append(pd.Categorical(s).codes.astype(float))
        return np.column_stack(cols) if cols else np.empty((len(sample), 0))
    return np.asarray(sample, dtype=float).reshape(len(sample), -1)
