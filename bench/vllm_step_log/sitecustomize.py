"""A step log for vLLM's model worker, loaded by ``bench/vllm_load_steps.py`` (this directory on
the server's ``PYTHONPATH``, ``STEP_LOG`` naming the log).

Python imports ``sitecustomize`` at start in every process of the server; this one does nothing
until the worker imports vLLM's model runner (``vllm.v1.worker.gpu_model_runner``, whose runner
vLLM's CPU runner extends), then wraps its ``execute_model`` and ``sample_tokens``: each step
appends one JSON line to ``STEP_LOG.<pid>``, with when the step began (``t0``, ``time.monotonic``),
when its forward pass returned (``t_forward``) and when its tokens were sampled (``t1``), and the
tokens it scheduled per request. Two clock reads and a line per step: microseconds against
steps of milliseconds, unlike the torch profiler's cost per operation (``vllm_trace.py``).
Stdlib only; it runs in vLLM's environment.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import sys
import time
from typing import Any

RUNNER = "vllm.v1.worker.gpu_model_runner"


def _wrap(module: Any, log: str) -> None:
    runner = module.GPUModelRunner
    execute, sample = runner.execute_model, runner.sample_tokens
    state: dict[str, Any] = {"file": None, "step": None}

    def execute_model(self: Any, scheduler_output: Any, *args: Any, **kwargs: Any) -> Any:
        step = {"t0": time.monotonic(), "tokens": dict(scheduler_output.num_scheduled_tokens)}
        state["step"] = step
        out = execute(self, scheduler_output, *args, **kwargs)
        step["t_forward"] = time.monotonic()
        return out

    def sample_tokens(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = sample(self, *args, **kwargs)
        step = state["step"]
        if step is not None:
            step["t1"] = time.monotonic()
            if state["file"] is None:
                state["file"] = open(f"{log}.{os.getpid()}", "a", buffering=1)  # noqa: SIM115
            state["file"].write(json.dumps(step) + "\n")
            state["step"] = None
        return out

    runner.execute_model, runner.sample_tokens = execute_model, sample_tokens


class _RunnerFinder(importlib.abc.MetaPathFinder):
    """Finds the model runner as Python would, and wraps it once its module has run."""

    def __init__(self, log: str) -> None:
        self.log = log

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != RUNNER:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader, log = spec.loader, self.log
        run = loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            _wrap(module, log)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if os.environ.get("STEP_LOG"):
    sys.meta_path.insert(0, _RunnerFinder(os.environ["STEP_LOG"]))
