"""TrainConfig: validation, clear errors, overrides, fingerprints."""

from __future__ import annotations

import pytest

from fstrain.kernel.errors import ConfigError
from fstrain.trainers.config import load_config


def test_defaults_and_yaml(tmp_path):
    path = tmp_path / "train.yaml"
    path.write_text(
        "model: xgboost\nseed: 7\nimbalance: scale_pos_weight\n"
        "params: {max_depth: 4, learning_rate: 0.05}\n"
        "tune:\n  search_space:\n    max_depth: {type: randint, low: 2, high: 8}\n"
    )
    cfg = load_config(path)
    assert cfg.model == "xgboost" and cfg.seed == 7 and cfg.params["max_depth"] == 4
    assert cfg.torch.amp == "auto" and cfg.tune.search_space["max_depth"]["high"] == 8


def test_unknown_model_did_you_mean():
    with pytest.raises(ConfigError, match=r"model.*'xgbost'.*Did you mean 'xgboost'"):
        load_config({"model": "xgbost"})


def test_unknown_option_did_you_mean():
    with pytest.raises(ConfigError, match=r"torch\.epoch.*Did you mean 'epochs'"):
        load_config({"model": "mlp", "torch": {"epoch": 3}})
    with pytest.raises(ConfigError, match=r"params\.max_dept.*Did you mean 'max_depth'"):
        load_config({"model": "xgboost", "params": {"max_dept": 3}})


def test_bad_values_name_option_and_value():
    with pytest.raises(ConfigError, match=r"imbalance.*'smote'"):
        load_config({"model": "xgboost", "imbalance": "smote"})
    with pytest.raises(ConfigError, match=r"torch\.batch_size.*0"):
        load_config({"model": "mlp", "torch": {"batch_size": 0}})


@pytest.mark.parametrize(
    ("model", "params", "pattern"),
    [
        ("lora", {"rank": 8.5}, r"params\.rank of model 'lora' must be an integer; got 8\.5"),
        ("lora", {"rank": "8.5"}, r"params\.rank .*got '8\.5'"),
        ("lora", {"rank": True}, r"params\.rank .*got True"),
        ("lora", {"rnak": 8}, r"params\.rnak is not a hyperparameter of model 'lora'.*'rank'"),
        # a bare string was split into characters, an empty list silently meant the default
        ("lora", {"target_modules": "q_proj"},
         r"params\.target_modules of model 'lora' must be a non-empty list of strings; "
         r"got 'q_proj'"),
        ("lora", {"target_modules": []}, r"params\.target_modules .*got \[\]"),
        # float sizes were truncated by int() when the net was built
        ("mlp", {"hidden_sizes": [8.5]},
         r"params\.hidden_sizes of model 'mlp' must be a non-empty list of positive integers"),
        ("mlp", {"hidden_sizes": 16}, r"params\.hidden_sizes .*got 16"),
        ("cnn", {"channels": [4, 0]}, r"params\.channels .*got \[4, 0\]"),
        ("cnn", {"hidden": 16.5}, r"params\.hidden of model 'cnn' must be an integer"),
        ("cnn", {"image_size": "28"}, r"params\.image_size .*got '28'"),
    ],
)
def test_bad_params_name_key_and_value(model, params, pattern):
    with pytest.raises(ConfigError, match=pattern):
        load_config({"model": model, "params": params})


def test_list_params_that_are_well_formed_are_kept():
    cfg = load_config({"model": "lora", "params": {"target_modules": ["q_proj"], "rank": 4}})
    assert cfg.params == {"target_modules": ["q_proj"], "rank": 4}
    assert load_config({"model": "mlp", "params": {"hidden_sizes": [8, 4]}}).params == {
        "hidden_sizes": [8, 4]}


@pytest.mark.parametrize(
    ("space", "pattern"),
    [
        ({"learning_rate": {"type": "loguniform", "low": 0, "high": 1}},
         r"loguniform needs low > 0"),
        ({"max_depth": {"type": "randint", "low": 8, "high": 2}}, r"low must be < high"),
        ({"max_depth": {"type": "randnit", "low": 2, "high": 8}}, r"Did you mean 'randint'"),
        ({"max_dpth": {"type": "randint", "low": 2, "high": 8}}, r"Did you mean 'max_depth'"),
        ({"max_depth": {"type": "choice", "values": []}}, r"values must be a non-empty list"),
        ({"max_depth": [2, 3]}, r"must be a mapping with a 'type'"),
    ],
)
def test_bad_search_space(space, pattern):
    with pytest.raises(ConfigError, match=pattern):
        load_config({"model": "xgboost", "tune": {"search_space": space}})


def test_overrides_route_torch_options_and_params():
    cfg = load_config({"model": "mlp"})
    new = cfg.with_overrides({"lr": 0.01, "batch_size": 32, "hidden_sizes": [8], "dropout": 0.2})
    assert new.torch.lr == 0.01 and new.torch.batch_size == 32
    assert new.params == {"hidden_sizes": [8], "dropout": 0.2}
    assert cfg.fingerprint() != new.fingerprint()
    assert cfg.fingerprint() == load_config({"model": "mlp", "resume": True}).fingerprint()


def test_config_import_is_cheap():
    import subprocess
    import sys

    code = ("import sys, fstrain.trainers.config, fstrain.trainers; "
            "print([m for m in ('torch','xgboost','ray','sklearn') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_importing_trainers_touches_no_global_rng():
    import importlib
    import random

    import numpy as np

    py_state, np_state = random.getstate(), np.random.get_state()
    for mod in ("config", "seeding", "data", "metrics", "imbalance", "preprocessing", "tabular",
                "predictor", "checkpoint", "nets", "images", "loop", "torch_models", "smoke",
                "tuning", "distributed", "api"):
        importlib.import_module(f"fstrain.trainers.{mod}")
    assert random.getstate() == py_state
    after = np.random.get_state()
    assert after[0] == np_state[0] and (after[1] == np_state[1]).all() and after[2] == np_state[2]
