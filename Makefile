# Newcomer entry points: `make demo` (main job, embedded stores, no servers) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed

.PHONY: setup demo test lint gate bench compose-up compose-test clean

setup: $(STAMP)

# torch first, pinned to the CPU build served from local disk (a plain `torch` pulls a multi-GB CUDA build).
$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[embeddings,dev]'
	touch $(STAMP)

demo: setup
	$(VENV)/bin/fabric demo

test: setup
	$(PY) -m pytest -q

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .fabric .cache .mypy_cache .ruff_cache .pytest_cache
