# Newcomer entry points: `make demo` (main job, embedded stores, no servers) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed

.PHONY: setup demo test lint gate baseline bench compose-up compose-test clean

setup: $(STAMP)

# torch first, pinned to the CPU build served from local disk (a plain `torch` pulls a multi-GB CUDA build).
# The framework extras are installed too: tests/fabric/integrations runs against the pinned packages.
$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[embeddings,dev,langchain,llamaindex,haystack]'
	touch $(STAMP)

demo: setup
	$(VENV)/bin/fabric demo

test: setup
	$(PY) -m pytest -q

# Retrieval quality gate vs the committed baseline (SciFact train when ../shared/datasets/scifact exists).
gate: setup
	PY=$(PY) .ci/eval

# Refresh the baseline deliberately, then commit it with the reason in the message.
EVAL_DATA := $(if $(wildcard ../shared/datasets/scifact),../shared/datasets/scifact,evals/queries/demo)
EVAL_SPLIT := $(if $(wildcard ../shared/datasets/scifact),train,test)
EVAL_BASELINE := $(if $(wildcard ../shared/datasets/scifact),evals/baselines/retrieval.json,evals/baselines/retrieval-demo.json)
baseline: setup
	$(PY) -m fabric.cli eval $(EVAL_DATA) --split $(EVAL_SPLIT) --write-baseline $(EVAL_BASELINE)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .fabric .cache .mypy_cache .ruff_cache .pytest_cache build

# The compose stack (Docker engine required): copy .env.example to .env and set the secrets first.
compose-up:
	@test -f .env || { echo "make compose-up: copy .env.example to .env and set the secrets first" >&2; exit 2; }
	docker compose up -d --build --wait

# Integration tests against the running stack (ports published on 127.0.0.1 by docker-compose.yml).
compose-test: setup
	@test -f .env || { echo "make compose-test: .env missing (copy .env.example)" >&2; exit 2; }
	set -a; . ./.env; set +a; \
	FABRIC_QDRANT_URL=http://127.0.0.1:6333 FABRIC_QDRANT_API_KEY="$$QDRANT_API_KEY" \
	FABRIC_MEILI_URL=http://127.0.0.1:7700 FABRIC_MEILI_KEY="$$MEILI_MASTER_KEY" \
	FABRIC_ARANGO_URL=http://127.0.0.1:8529 FABRIC_ARANGO_PASSWORD="$$ARANGO_ROOT_PASSWORD" \
	FABRIC_SEARXNG_URL=http://127.0.0.1:8888 \
	$(PY) -m pytest -q -m integration
