# Two entry points on a fresh machine:
#   make profile   set up, then profile this machine (no cluster needed); results in out/
#   make test      set up, then lint, type-check and run the whole test suite
#
# torch is installed before the project so that the project's plain torch requirement never
# pulls a second, multi-GB build. Override TORCH_SPEC for another build, e.g. a ROCm wheel.

PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
OUT ?= out
PROFILE_ARGS ?=
BIN := $(VENV)/bin

.PHONY: profile test lint typecheck unit setup setup-dev manifests clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.torch: | $(BIN)/python
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install --quiet "$(TORCH_SPEC)"
	touch $@

$(VENV)/.profiler: pyproject.toml $(VENV)/.torch
	$(BIN)/pip install --quiet -e ".[profiler]"
	touch $@

$(VENV)/.dev: pyproject.toml $(VENV)/.torch
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $@

setup: $(VENV)/.profiler
setup-dev: $(VENV)/.dev

profile: setup
	mkdir -p $(OUT)
	$(BIN)/roofline profile --json $(OUT)/result.json --markdown $(OUT)/report.md \
		--plot $(OUT)/roofline.png $(PROFILE_ARGS)

lint: setup-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: setup-dev
	$(BIN)/mypy

unit: setup-dev
	$(BIN)/pytest

test: lint typecheck unit

manifests: setup-dev
	$(BIN)/python scripts/generate-manifests.py

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache .mypy_cache .ruff_cache
