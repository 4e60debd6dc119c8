# Newcomer entry points: `make demo` (main job, embedded stores, no servers) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed

.PHONY: setup test-deps demo test lint docs gate baseline bench compose-up compose-test clean schemathesis

setup: $(STAMP)

# deploy/install.sh: torch's CPU build first (a plain `torch` pulls a multi-GB CUDA build), then the project.
# The framework extras are installed too: tests/fabric/integrations runs against the pinned packages, and so is the
# lancedb extra: tests/lanes/vector/lancedb runs the LanceDB backend for real.
# The `ann` extra (hnswlib, the vector store's optional HNSW accelerator) has no wheel: pip compiles it, so a C++
# compiler is installed first when missing (apt-get, as root). A user's `pip install retrieval-fabric` needs none.
$(STAMP): pyproject.toml
	@command -v g++ >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends g++; } || \
	  { command -v g++ >/dev/null 2>&1 || echo "make setup: no g++: pip cannot build hnswlib; install a C++ compiler" >&2; }
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	sh deploy/install.sh $(PY) -e '.[embeddings,ann,lancedb,dev,langchain,llamaindex,haystack]'
	touch $(STAMP)

demo: setup
	$(VENV)/bin/fabric demo

test: setup test-deps
	$(PY) -m pytest -q

# Debian packages the tests run for real, installed only when missing: promtool (prometheus) for
# tests/deploy/test_alerts.py, the PostgreSQL server (postgresql: initdb, pg_ctl) for the replicas' shared state
# (tests/fabric/serve/state, tests/fabric/serve/test_replicas.py), Chromium and its driver for the search console's
# browser tests (tests/fabric/serve/test_console.py). With apt-get when root, else a message (those tests then skip,
# saying why). About two minutes on a Debian host.
test-deps:
	@missing=""; \
	command -v promtool >/dev/null 2>&1 || missing="$$missing prometheus"; \
	{ command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; } || missing="$$missing postgresql"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v chromedriver >/dev/null 2>&1 || missing="$$missing chromium-driver"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	  else \
	    echo "make test-deps: missing Debian package(s):$$missing; install them as root (their tests skip)" >&2; \
	  fi; \
	fi

# Retrieval quality gate vs the committed baselines (SciFact train and CISI test when ../shared/datasets exists,
# else the project's own query set).
gate: setup
	PY=$(PY) .ci/eval

# Refresh the baselines deliberately, then commit them with the reason in the message.
baseline: setup
	@if [ -d ../shared/datasets/scifact ]; then \
	  $(PY) -m fabric.cli eval ../shared/datasets/scifact --split train --write-baseline evals/baselines/retrieval.json; \
	fi
	@if [ -d ../shared/datasets/cisi ]; then \
	  $(PY) -m fabric.cli eval ../shared/datasets/cisi --split test --out evals/artifacts/retrieval-cisi.json \
	    --write-baseline evals/baselines/retrieval-cisi.json; \
	fi
	@if [ ! -d ../shared/datasets/scifact ] && [ ! -d ../shared/datasets/cisi ]; then \
	  $(PY) -m fabric.cli eval fabric/demo/queries --split test --write-baseline evals/baselines/retrieval-demo.json; \
	fi

# A stock `schemathesis run --checks all` against a live service (every check, no filter; bounded by examples).
schemathesis: setup
	PY=$(PY) .ci/schemathesis

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(VENV)/bin/hadolint Dockerfile
	$(VENV)/bin/mkdocs build --strict --quiet --site-dir build/site

# The documentation site with the API reference generated from the docstrings (build/site; warnings are errors).
docs: setup
	$(VENV)/bin/mkdocs build --strict --site-dir build/site

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
