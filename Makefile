# The verbs a newcomer needs. `make run` and `make test` do all set-up on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
# Prefect's temporary server otherwise logs a "database is locked" traceback from its telemetry.
export PREFECT_SERVER_ANALYTICS_ENABLED := false
# Python writes each module's bytecode on its first import (the install skips byte-compiling, see
# --no-compile below). Some CI images set PYTHONDONTWRITEBYTECODE=1, which makes every process a run or
# the suite starts (CLI runs, servers, workers) compile torch, transformers, MLflow and Prefect again,
# about 6 CPU s each (2026-11-29, 2 cores: the S3 scoring test 43 s with it set, 25 s without).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install run test test-fast lint format bench clean stack-up stack-down stack-status stack-restart

install: $(STAMP)

# torch is pinned here, not in pyproject: this machine carries a CPU wheel of 2.13.0 on disk, and a
# looser requirement would pull a multi-GB CUDA build. Users keep the open range from pyproject.toml.
# One pip run resolves torch and the project together (two runs resolved and checked everything twice).
# --no-compile: pip would byte-compile every file of 2.3 GB of packages; Python compiles the modules
# a run imports, once, on first import.
# -c constraints.txt: the tested set, every other package at the version the suite passes with
# (pyproject.toml keeps only lower bounds and major caps, for those who install simpair as a package).
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q --no-compile -c constraints.txt torch==2.13.0 -e '.[dev]'
	touch $(STAMP)

# Everything the pipeline writes goes under SIMPAIR_HOME (gitignored). `make run ARGS=--force` retrains
# even when no source changed; `make run PROFILE=smoke` runs the tiny-model profile (docs/nightly.md, Durations).
SIMPAIR_HOME ?= $(CURDIR)/.simpair
export SIMPAIR_HOME
PROFILE ?= default
ARGS ?=
# The smoke profile's random tiny models never beat the real backbone at the gate, so no champion
# exists after a smoke night: its sample scoring uses the challenger.
SCORE_MODEL ?= $(if $(filter smoke,$(PROFILE)),simpair-paraphrase@challenger,simpair-paraphrase@champion)

run: install
	$(BIN)/simpair nightly --profile $(PROFILE) $(ARGS)
	$(BIN)/simpair make-sample-inbox --inbox $(SIMPAIR_HOME)/sample-inbox
	$(BIN)/simpair score --inbox $(SIMPAIR_HOME)/sample-inbox --out $(SIMPAIR_HOME)/scoring --model $(SCORE_MODEL)

# A real stack on this machine, bound to 127.0.0.1: Prefect server + MLflow server (SQLite), a cpu and
# a gpu process worker, the deployments applied. Ports, PIDs, env file and logs in $(SIMPAIR_HOME)/stack/.
# Then `source $(SIMPAIR_HOME)/stack/env` and e.g. `prefect deployment run nightly-retrain/nightly`.
stack-up: install
	$(BIN)/python -m simpair.ops.local_stack up

stack-down:
	$(BIN)/python -m simpair.ops.local_stack down

stack-status:
	$(BIN)/python -m simpair.ops.local_stack status

# One service again, same ports and env file: make stack-restart S=prefect|mlflow|worker-cpu|worker-gpu
S ?=
stack-restart:
	$(BIN)/python -m simpair.ops.local_stack restart $(S)

# Lint first: a style slip fails in seconds, not after the suite. Four pytest workers (pytest-xdist),
# one test file each at a time: the suite spends much of its time waiting on servers, workers and
# SQLite, so more workers than cores fill the waits (2 cores, 2026-11-26: 18 min 51 s and 21 min 10 s of
# tests with four on two fresh clones, 22 min 14 s with three, 25 min with two). TEST_WORKERS=0 runs it in
# one process.
TEST_WORKERS ?= 4
test: lint
	$(BIN)/python -m pytest -q --timeout=900 --durations=30 $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)

test-fast: install
	$(BIN)/python -m pytest -q -m "not slow and not integration"

LINTED := simpair cli tasks flows ops tests benchmarks

lint: install
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

format: install
	$(BIN)/ruff format $(LINTED)
	$(BIN)/ruff check --fix $(LINTED)

bench: install
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[bench]'
	$(BIN)/python benchmarks/ingest.py
	$(BIN)/python benchmarks/quality.py
	$(BIN)/python benchmarks/score.py

clean:
	rm -rf .simpair .pytest_cache .ruff_cache
