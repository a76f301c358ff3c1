"""``HopsworksModelRegistry``: the ``hsml`` model registry with fstrain's additions.

A factory of :class:`~model_registry.model.Model` over a
:class:`~model_registry.hopsworks.model_storage.HopsworksModelStorage`, which adds content
hashes, the validation status, lineage, attachments and the append-only history to ``hsml``'s
models (see that module).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from feature_store.hopsworks.sdk_calls import sdk_attr, sdk_call
from fstrain.kernel.errors import InvalidArgumentError
from model_registry.api import ModelDraft
from model_registry.errors import ModelNotFoundError, unknown_metric
from model_registry.hopsworks.model_storage import HopsworksModelStorage
from model_registry.hopsworks.policies import HopsworksPolicyStore
from model_registry.metric_names import metric_key, recorded_key
from model_registry.model import Model, ModelFactories
from model_registry.naming import check_model_name
from model_registry.statuses import APPROVED, is_approved

if TYPE_CHECKING:  # pragma: no cover
    from feature_store.hopsworks.project import HopsworksProject


class HopsworksModelRegistry(ModelFactories):
    """``hsml.model_registry.ModelRegistry`` with content hashes, status and attachments."""

    storage: HopsworksModelStorage

    backend = "hopsworks"

    def __init__(self, sdk_mr: Any, project: HopsworksProject) -> None:
        self.storage = HopsworksModelStorage(sdk_mr, project)
        self.project = project
        self._policies = HopsworksPolicyStore(project)

    @property
    def policies(self) -> HopsworksPolicyStore:
        """Each model's gate-policy files (``Resources/fstrain/gate-policies`` of the
        project)."""
        return self._policies

    def __repr__(self) -> str:
        return "HopsworksModelRegistry()"

    def get_model(self, name: str, version: int | None = None) -> Model:
        """A saved version (``None``: as the SDK decides — version 1 with a warning)."""
        check_model_name(name)
        sdk_model = sdk_call(self.storage.sdk_registry, "ModelRegistry.get_model", name,
                             version=version, _owner=f"Model '{name}'")
        if sdk_model is None:
            raise ModelNotFoundError(
                f"Model '{name}'{'' if version is None else f' version {version}'} does not "
                "exist in the Hopsworks model registry. Check the name, or train it first."
            )
        return self._model(sdk_model)

    def get_models(self, name: str) -> list[Model]:
        """Every saved version of ``name``, by ascending version."""
        check_model_name(name)
        models = sdk_call(self.storage.sdk_registry, "ModelRegistry.get_models", name,
                          _owner=f"Model '{name}'") or []
        return sorted((self._model(m) for m in models), key=lambda m: m.version or 0)

    def get_best_model(self, name: str, metric: str, direction: str = "max", *,
                       require_approval: bool = False,
                       allow_overrides: bool = False) -> Model | None:
        """The version with the best training metric. A bare metric (``roc_auc``, ``auc``)
        means its validation value (:mod:`model_registry.metric_names`). The positional
        parameters are hsml's; with ``require_approval=True`` only versions a reviewer approved
        after their latest validation run count, and of those only approvals given without
        ``--override`` unless ``allow_overrides=True`` (ranked here: hsml knows no approvals).

        Returns None when the model has no version (as hsml, with a warning) or when no
        version passes those filters.

        Raises:
            UnknownMetricError: no version records ``metric``; the message lists the recorded
                metrics (as the local registry).
        """
        check_model_name(name)
        if direction not in ("max", "min"):
            raise InvalidArgumentError(
                f"get_best_model: direction must be 'max' or 'min'. Got {direction!r} instead."
            )
        sdk_mr = self.storage.sdk_registry
        versions = sdk_call(sdk_mr, "ModelRegistry.get_models", name,
                            _owner=f"Model '{name}'") or []
        if not versions:
            warnings.warn(f"get_best_model: model '{name}' has no version in the Hopsworks model "
                          "registry. Returning None.", UserWarning, stacklevel=2)
            return None
        recorded = {k for m in versions for k in (getattr(m, "training_metrics", None) or {})}
        key = recorded_key(metric, recorded)
        if key is None:
            raise unknown_metric(name, metric, metric_key(metric), sorted(recorded))
        if require_approval:
            return self._best_approved(versions, key, direction, allow_overrides)
        best = sdk_call(sdk_mr, "ModelRegistry.get_best_model", name, key, direction,
                        _owner=f"Model '{name}'")
        if best is None:
            return None
        model = self._model(best)
        model.require_verified()  # never hand out a version whose record does not verify
        return model

    @property
    def trust_store(self) -> Any:
        """The store's trust list (a :class:`~model_registry.audit.trust.TrustStore`)."""
        return self.storage.trust_store()

    def _best_approved(self, versions: list[Any], key: str, direction: str,
                       allow_overrides: bool) -> Model | None:
        """The best approved version by training metric ``key`` (ties: the newest)."""
        scored = []
        for sdk_model in versions:
            value = (getattr(sdk_model, "training_metrics", None) or {}).get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                scored.append((float(value), sdk_attr(sdk_model, "Model", "version") or 0,
                               sdk_model))
        scored.sort(key=lambda t: (t[0] if direction == "max" else -t[0], t[1]), reverse=True)
        for _, _, sdk_model in scored:
            model = self._model(sdk_model)
            model.require_verified()
            approval = model.approval_status
            if approval == APPROVED or (allow_overrides and is_approved(approval)):
                return model
        return None

    def _model(self, sdk_model: Any) -> Model:
        """The model of a version the SDK returned."""
        handle = self.storage.version_of(sdk_model)
        return Model(self.storage, ModelDraft(
            name=handle.name,
            framework=str(sdk_attr(sdk_model, "Model", "framework") or "python").lower(),
            version=handle.version,
            metrics=dict(sdk_attr(sdk_model, "Model", "training_metrics") or {}),
            description=sdk_attr(sdk_model, "Model", "description"),
            training_dataset_version=sdk_attr(sdk_model, "Model", "training_dataset_version"),
        ), handle)
