"""Conformance: every SDK call the adapter makes binds to the installed SDK's real signatures.

No cluster is reachable here, so this is what keeps the adapter honest against SDK upgrades:

1. every entry of ``SDK_CALLS`` binds, with placeholders in its recorded shape, to
   ``inspect.signature`` of the real method (``self`` included), and every keyword is a *named*
   parameter (not swallowed by ``**kwargs``);
2. every attribute of ``SDK_ATTRIBUTES`` exists on the real class;
3. the adapter's source (read with ``ast``) calls the SDK only through ``sdk_call``/``sdk_attr``
   with keys and shapes from the table, never ``x._sdk.method(...)`` or ``hsfs.*`` directly,
   and every table entry is used (the table cannot drift from the code either way).
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path
from typing import Any

import pytest

from feature_store.hopsworks.sdk_calls import (
    SDK_ATTRIBUTES,
    SDK_CALLS,
    AdapterDriftError,
    SdkCall,
    sdk_attr,
    sdk_call,
)

REPO = Path(__file__).resolve().parents[2]
ADAPTER_FILES = sorted(
    [*(REPO / "feature_store" / "hopsworks").glob("*.py"),
     *(REPO / "model_registry" / "hopsworks").glob("*.py"),
     REPO / "pipelines" / "jobs.py"]
)
SDK_MODULES = ("hopsworks", "hsfs", "hsml", "hopsworks_common")
FRAMEWORKS = ("python", "sklearn", "torch")


def resolve(path: str) -> Any:
    """The object at a dotted path (longest importable module prefix, then attributes)."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = inspect.getattr_static(obj, attr) if inspect.isclass(obj) else getattr(obj, attr)
        return obj
    raise ImportError(path)


def bind(spec: SdkCall) -> inspect.BoundArguments:
    """Bind the recorded call shape to the real signature; raise TypeError on a mismatch."""
    func = resolve(spec.target)
    if isinstance(func, staticmethod | classmethod):
        func = func.__func__
    sig = inspect.signature(func)
    placeholder = object()
    args = [placeholder] * len(spec.args)
    if spec.bound:
        args.insert(0, placeholder)  # self
    bound = sig.bind(*args, **{k: placeholder for k in spec.kwargs})
    params = sig.parameters
    for name in spec.kwargs:
        kind = params[name].kind if name in params else None
        if kind not in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
            raise TypeError(f"{spec.target}: keyword {name!r} is not a named parameter "
                            f"(it would only be swallowed by **kwargs)")
    for name, value in bound.arguments.items():
        if params[name].kind is inspect.Parameter.VAR_POSITIONAL and value:
            raise TypeError(f"{spec.target}: positional arguments land in *{name}")
    return bound


@pytest.mark.parametrize("key", sorted(SDK_CALLS))
def test_sdk_call_binds_to_the_installed_sdk(key):
    spec = SDK_CALLS[key]
    bound = bind(spec)
    assert set(spec.kwargs) <= set(bound.arguments)


@pytest.mark.parametrize("cls_path", sorted(SDK_ATTRIBUTES))
def test_sdk_attributes_exist_on_the_installed_sdk(cls_path):
    cls = resolve(cls_path)
    missing = [a for a in SDK_ATTRIBUTES[cls_path] if inspect.getattr_static(cls, a, None) is None]
    assert not missing, f"{cls_path} lacks {missing}"


def test_the_binding_check_catches_a_renamed_parameter():
    broken = SdkCall("hsfs.feature_group.FeatureGroup.insert", args=("features",),
                     kwargs=("overwrite", "wait_for_it"))
    with pytest.raises(TypeError):
        bind(broken)
    swallowed = SdkCall("hsfs.feature_view.FeatureView.train_validation_test_split",
                        kwargs=("seed",))  # accepted only by **kwargs in 5.2.1
    with pytest.raises(TypeError, match="named parameter"):
        bind(swallowed)
    too_many = SdkCall("hsfs.feature_store.FeatureStore.get_feature_view",
                       args=("name", "version", "extra"))
    with pytest.raises(TypeError):
        bind(too_many)


# -- the adapter source uses only the table ----------------------------------------------------


def _calls(tree: ast.AST, func_name: str) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name) and n.func.id == func_name]


def _keys(node: ast.expr) -> list[str]:
    """The table keys a key argument can take (a string, or an f-string over frameworks)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        tail = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
        return [f"{fw}{tail}" for fw in FRAMEWORKS]
    return []


def _adapter_trees() -> list[tuple[Path, ast.AST]]:
    return [(p, ast.parse(p.read_text(), filename=str(p))) for p in ADAPTER_FILES]


def test_adapter_calls_only_table_entries_in_their_recorded_shape():
    used: set[str] = set()
    dynamic = {"FeatureView.create_train_validation_test_split",
               "FeatureView.create_train_test_split", "FeatureView.create_training_data",
               "FeatureView.get_train_validation_test_split", "FeatureView.get_train_test_split",
               "FeatureView.get_training_data"}  # keys passed through a variable (see below)
    problems = []
    for path, tree in _adapter_trees():
        for call in _calls(tree, "sdk_call"):
            where = f"{path.name}:{call.lineno}"
            if len(call.args) < 2:
                problems.append(f"{where}: sdk_call needs (obj, key, ...)")
                continue
            keys = _keys(call.args[1])
            if not keys:
                if isinstance(call.args[1], ast.Name) and call.args[1].id == "key":
                    continue  # feature_view.py passes one of ``dynamic`` (checked below)
                problems.append(f"{where}: the key must be a literal")
                continue
            for key in keys:
                spec = SDK_CALLS.get(key)
                if spec is None:
                    problems.append(f"{where}: {key!r} is not in SDK_CALLS")
                    continue
                used.add(key)
                positional = call.args[2:]
                if any(isinstance(a, ast.Starred) for a in positional):
                    problems.append(f"{where}: *args hides the call shape of {key}")
                elif len(positional) != len(spec.args):
                    problems.append(f"{where}: {key} takes {len(spec.args)} positional, "
                                    f"got {len(positional)}")
                names = {k.arg for k in call.keywords if k.arg is not None} - {"_owner"}
                if not names <= set(spec.kwargs):
                    problems.append(f"{where}: {key} keywords {sorted(names - set(spec.kwargs))} "
                                    "not declared")
        for call in _calls(tree, "sdk_attr"):
            where = f"{path.name}:{call.lineno}"
            cls, attr = (a.value if isinstance(a, ast.Constant) else None for a in call.args[1:3])
            full = next((p for p in SDK_ATTRIBUTES if p.rsplit(".", 1)[1] == cls), None)
            if full is None or attr not in SDK_ATTRIBUTES[full]:
                problems.append(f"{where}: sdk_attr({cls!r}, {attr!r}) not in SDK_ATTRIBUTES")
        for call in _calls(tree, "sdk_attrs"):
            cls = call.args[1].value if isinstance(call.args[1], ast.Constant) else None
            if not any(p.rsplit(".", 1)[1] == cls for p in SDK_ATTRIBUTES):
                problems.append(f"{path.name}:{call.lineno}: sdk_attrs({cls!r}) not declared")
    assert not problems, "\n".join(problems)
    fv_source = (REPO / "feature_store" / "hopsworks" / "feature_view.py").read_text()
    for key in dynamic:
        assert f'"{key}"' in fv_source
    used |= dynamic
    assert set(SDK_CALLS) - used == set(), "stale SDK_CALLS entries (no caller)"


def test_adapter_never_touches_sdk_objects_directly():
    problems = []
    for path, tree in _adapter_trees():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                    and node.value.attr == "_sdk"):
                problems.append(f"{path.name}:{node.lineno}: ._sdk.{node.attr} bypasses the table")
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in SDK_MODULES):
                problems.append(f"{path.name}:{node.lineno}: {node.value.id}.{node.attr} "
                                "bypasses the table")
            if isinstance(node, ast.Import | ast.ImportFrom):
                module = getattr(node, "module", None) or ""
                names = [a.name for a in node.names]
                roots = {m.split(".")[0] for m in [module, *names] if m}
                if roots & set(SDK_MODULES) and not _inside_function(tree, node):
                    problems.append(f"{path.name}:{node.lineno}: SDK imported at module level")
    assert not problems, "\n".join(problems)


def _inside_function(tree: ast.AST, target: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if any(child is target for child in ast.walk(node)):
                return True
    return False


# -- the runtime guard -------------------------------------------------------------------------


class _Fake:
    def __init__(self) -> None:
        self.calls: list[tuple[tuple, dict]] = []

    def insert(self, *args: Any, **kwargs: Any) -> str:
        self.calls.append((args, kwargs))
        return "ok"

    def read(self, **kwargs: Any) -> Any:
        raise ConnectionError("socket closed")


def test_sdk_call_refuses_undeclared_shapes_at_run_time():
    fake = _Fake()
    assert sdk_call(fake, "FeatureGroup.insert", "df", wait=True) == "ok"
    assert fake.calls == [(("df",), {"wait": True})]
    with pytest.raises(AdapterDriftError, match="does not declare"):
        sdk_call(fake, "FeatureGroup.insert", "df", wait_for_it=True)
    with pytest.raises(AdapterDriftError, match="positional"):
        sdk_call(fake, "FeatureGroup.insert")
    with pytest.raises(AdapterDriftError, match="not declared"):
        sdk_call(fake, "FeatureGroup.upsert_everything")
    with pytest.raises(AdapterDriftError):
        sdk_attr(fake, "FeatureGroup", "secret")
    assert len(fake.calls) == 1


def test_sdk_errors_become_fstrain_errors_naming_the_call():
    from fstrain.kernel.errors import BackendError, NotFoundError

    with pytest.raises(BackendError, match="feature group 'x' v1: lost the connection"):
        sdk_call(_Fake(), "FeatureGroup.read", _owner="feature group 'x' v1")

    class Response:
        status_code = 404

    class Missing(Exception):
        response = Response()

    class Gone:
        def get_feature_view(self, name: str, version: int | None = None) -> None:
            raise Missing("feature view not found")

    with pytest.raises(NotFoundError, match="FeatureStore.get_feature_view"):
        sdk_call(Gone(), "FeatureStore.get_feature_view", "v", version=1)


# -- the embedded store's spine API has the SDK's signatures -----------------------------------

SPINE_VIEW_METHODS = ("get_batch_data", "training_data", "train_test_split",
                      "train_validation_test_split", "create_training_data",
                      "create_train_test_split", "create_train_validation_test_split")


def test_local_get_or_create_spine_group_has_the_sdk_signature():
    from feature_store.local.objects.feature_store import FeatureStore

    local = inspect.signature(FeatureStore.get_or_create_spine_group).parameters
    sdk = inspect.signature(resolve("hsfs.feature_store.FeatureStore.get_or_create_spine_group")).parameters
    assert [(n, p.default) for n, p in local.items()] == [(n, p.default) for n, p in sdk.items()]


@pytest.mark.parametrize("method", SPINE_VIEW_METHODS)
def test_local_view_methods_take_spine_where_the_sdk_does(method):
    from feature_store.local.objects.feature_view import FeatureView

    local = inspect.signature(getattr(FeatureView, method)).parameters
    sdk = list(inspect.signature(resolve(f"hsfs.feature_view.FeatureView.{method}")).parameters)
    upto = sdk[: sdk.index("spine") + 1]  # the SDK's parameters up to spine, in its order
    assert [n for n in local if n in upto] == [n for n in upto if n in local]
    assert "spine" in local and local["spine"].default is None
    assert list(local).index("spine") < len(upto)  # nothing the SDK lacks pushed it back


# -- the local backend takes the SDK's parameters ----------------------------------------------

#: local methods a notebook calls as the SDK's: ``(local class, SDK class, method)``. Each takes
#: the SDK's parameters in the SDK's order with its defaults (``**kwargs`` aside), so a
#: positional or keyword call written for a cluster binds the same way here.
LOCAL_AS_SDK = [
    ("feature_store.local.objects.feature_view.FeatureView", "hsfs.feature_view.FeatureView", m)
    for m in ("init_serving", "get_feature_vector", "get_feature_vectors", "transform",
              "enable_logging", "log", "read_log", "pause_logging", "resume_logging",
              "materialize_log", "delete_log", "get_log_timeline")
]


def _named_parameters(func: Any) -> list[tuple[str, Any]]:
    return [(p.name, p.default) for p in inspect.signature(func).parameters.values()
            if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]


@pytest.mark.parametrize(("local", "sdk", "method"), LOCAL_AS_SDK,
                         ids=[f"{s.rsplit('.', 1)[1]}.{m}" for _, s, m in LOCAL_AS_SDK])
def test_local_methods_take_the_sdks_parameters_in_order_with_its_defaults(local, sdk, method):
    ours = _named_parameters(getattr(resolve(local), method))
    theirs = _named_parameters(getattr(resolve(sdk), method))
    assert ours == theirs
