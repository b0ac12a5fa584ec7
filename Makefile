# corral: two commands on a fresh machine.
#   make run    set everything up, then start the main job (foreground)
#   make test   set everything up, then ruff, mypy and the whole test suite
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup engine images run test lint typecheck unit bench clean

setup: engine $(STAMP) images

engine:
	@scripts/ensure-docker.sh

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11) and "corral needs Python >= 3.11")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	@$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

images: engine $(STAMP)
	@$(BIN)/corral images build

run: setup
	@$(BIN)/corral doctor
	@echo "== a real sandboxed run: what the sandbox enforces, seen from inside =="
	@$(BIN)/corral run examples/sandbox_report.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

test: setup lint typecheck
	$(BIN)/pytest

unit: $(STAMP)
	$(BIN)/pytest -m unit

bench: setup
	$(BIN)/python bench/execute_program.py --write docs/benchmarks.md

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
