"""``LocalModelRegistry``: the model registry on the local file system (hsml's ``ModelRegistry``).

A factory of :class:`~model_registry.model.Model` over a
:class:`~model_registry.local.model_storage.LocalModelStorage` (the version folders and the
index under ``root``), plus the index queries: a version, every version, the best version.
"""

from __future__ import annotations

import sqlite3
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fstrain.kernel.errors import (
    BackendError,
    InvalidArgumentError,
    did_you_mean,
    listing,
)
from model_registry.api import ModelDraft
from model_registry.audit.trust import TrustStore
from model_registry.errors import VersionWarning, unknown_metric
from model_registry.local.index import ModelRecord, RegistryIndex
from model_registry.local.model_storage import LocalModelStorage
from model_registry.local.policies import LocalPolicyStore
from model_registry.metric_names import metric_key, recorded_key
from model_registry.model import Model, ModelFactories
from model_registry.naming import check_model_name, check_version
from model_registry.statuses import APPROVED

INDEX_FILE = "index.sqlite"


class LocalModelRegistry(ModelFactories):
    """A model registry stored under ``root`` (``<project root>/model_registry``).

    Mirrors ``hsml.model_registry.ModelRegistry``: ``python``/``sklearn``/``torch``
    ``.create_model(...)``, ``get_model``, ``get_models``, ``get_best_model``.
    """

    storage: LocalModelStorage

    DEFAULT_VERSION = 1

    def __init__(self, root: Path, feature_store: Callable[[], Any] | None = None, *,
                 after_history: Callable[[LocalModelRegistry], None] | None = None) -> None:
        """``feature_store`` returns the project's feature store (for
        ``model.get_feature_view()``); a registry opened on its own has none.
        ``after_history(registry)`` runs after every validation run or sign-off appended to
        any version (the project regenerates the report index with it)."""
        self.root = Path(root)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self._index = RegistryIndex(self.root / INDEX_FILE)
        except (OSError, sqlite3.Error) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            damaged = isinstance(exc, sqlite3.DatabaseError) and not isinstance(
                exc, sqlite3.OperationalError)
            hint = (f"its index {self.root / INDEX_FILE} is damaged; restore it from a backup"
                    if damaged else "point --root or FSTRAIN_HOME at a writable folder")
            raise BackendError(
                f"model registry at {self.root} cannot be opened ({type(exc).__name__}: "
                f"{reason}): {hint}."
            ) from exc
        self.storage = LocalModelStorage(
            self.root, self._index, feature_store,
            after_history=None if after_history is None else lambda: after_history(self))
        self._policies = LocalPolicyStore(self.root, self.storage.files.new_staging_dir)

    @property
    def policies(self) -> LocalPolicyStore:
        """Each model's gate-policy files (``<root>/gate-policies/<model>/``)."""
        return self._policies

    def __repr__(self) -> str:
        return f"LocalModelRegistry(root='{self.root}')"

    # ------------------------------------------------------------------ reading

    def get_model(self, name: str, version: int | None = None) -> Model:
        """Return a saved model version.

        Args:
            name: model name.
            version: version to return. ``None`` returns **version 1** (as Hopsworks does)
                and emits a :class:`VersionWarning`; use :meth:`get_models` or
                :meth:`get_best_model` to find the latest or best version.

        Raises:
            ModelNotFoundError: the model or the version does not exist.
        """
        check_model_name(name)
        if version is None:
            warnings.warn(
                f"No version provided for getting model '{name}', defaulting to version "
                f"{self.DEFAULT_VERSION}.",
                VersionWarning,
                stacklevel=2,
            )
            version = self.DEFAULT_VERSION
        check_version(version, name=name)
        record = self._index.get(name, version)
        if record is None:
            raise self.storage.not_found(name, version)
        return self._model(record)

    def get_models(self, name: str) -> list[Model]:
        """Every saved version of ``name``, by ascending version (empty if there is none)."""
        check_model_name(name)
        return [self._model(r) for r in self._index.list(name)]

    def get_best_model(
        self, name: str, metric: str, direction: str = "max", validated_only: bool = False,
        *, require_approval: bool = False, allow_overrides: bool = False,
    ) -> Model | None:
        """The version of ``name`` with the highest (``"max"``) or lowest (``"min"``) training
        metric ``metric``; ties go to the newest version. ``metric`` is a registered key
        (``validation_roc_auc``) or a bare name meaning its validation value (``roc_auc``,
        ``auc``; see :mod:`model_registry.metric_names`). Versions without that metric are
        skipped. With ``validated_only=True`` only versions whose validation status is a plain
        ``passed`` count (not ``passed (policy deviation)``); with ``require_approval=True``
        only versions a reviewer approved after their latest validation run, and of those
        only approvals given without ``--override`` unless ``allow_overrides=True``.

        Returns None when the model has no version (as hsml; a warning names the models that
        exist) or when no version passes those filters.

        Raises:
            UnknownMetricError: no version of the model records ``metric`` (a typo, or a
                metric the registry does not keep); the message lists the recorded metrics.
            VerificationError: the best version's files, history or signatures do not verify
                (it is refused, not skipped: a broken record needs a person's attention).
        """
        check_model_name(name)
        if not isinstance(metric, str) or not metric:
            raise InvalidArgumentError(
                f"get_best_model: metric must be a non-empty string. Got {metric!r} instead."
            )
        direction_norm = direction.lower() if isinstance(direction, str) else direction
        if direction_norm not in ("max", "min"):
            raise InvalidArgumentError(
                f"get_best_model: direction must be 'max' or 'min'. Got {direction!r} instead."
            )
        key = self._ranking_key(name, metric)
        if key is None:
            return None
        if not (require_approval and not allow_overrides):
            record = self._index.best(name, key, direction_norm, validated_only=validated_only,
                                      require_approval=require_approval)
            if record is None:
                return None
            model = self._model(record)
            model.require_verified()  # never hand out a version whose record does not verify
            return model

        for record in self._index.ranked(name, key, direction_norm,
                                         validated_only=validated_only, require_approval=True):
            model = self._model(record)
            model.require_verified()
            if model.approval_status == APPROVED:  # read from the verified history records
                return model
        return None

    def _ranking_key(self, name: str, metric: str) -> str | None:
        """The metric key to rank ``name``'s versions by; None (with a warning naming the
        models that exist) when the model has no version."""
        records = self._index.list(name)
        if not records:
            names = self._index.names()
            warnings.warn(
                f"get_best_model: model '{name}' does not exist in the registry at {self.root} "
                f"(models: {listing(names)}).{did_you_mean(name, names)} Returning None.",
                UserWarning, stacklevel=3,
            )
            return None
        recorded = {m for r in records for m in r.metrics}
        key = recorded_key(metric, recorded)
        if key is None:
            raise unknown_metric(name, metric, metric_key(metric), sorted(recorded))
        return key

    @property
    def trust_store(self) -> TrustStore:
        """The store's trust list (``<store root>/trust``; absent in an unsigned store)."""
        return self.storage.trust_store()

    def list_models(self, name: str | None = None) -> list[Model]:
        """Every saved version of ``name`` — or of every model — by name then version."""
        if name is not None:
            check_model_name(name)
        return [self._model(r) for r in self._index.list(name)]

    def _model(self, record: ModelRecord) -> Model:
        return Model(self.storage, ModelDraft(
            name=record.name, framework=record.framework, version=record.version,
            metrics=dict(record.metrics), description=record.description,
            training_dataset_version=record.training_dataset_version), record)
