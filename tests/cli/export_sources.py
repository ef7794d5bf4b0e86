"""The two sources ``roofline export`` reads, built through the real code that writes them: the
synthetic saved result (``tests/profiler/synthetic.py``) and a RooflineProfile whose status the
operator's own status builder wrote for three nodes of two GPU classes."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from roofline_cli.export.plans import ClassPlan
from roofline_operator.core.model_spec import ModelSpec
from roofline_operator.core.names import NodeState
from roofline_operator.core.node_results import from_compact
from roofline_operator.decide.model_status import ModelsView
from roofline_operator.decide.records import NodeRecord
from roofline_profiler.wire.compact_models import CompactModelPlan
from tests.operator.unit.model_builders import plan
from tests.operator.unit.operator_builders import device, profile, status_of
from tests.profiler.synthetic import planned_result

MODEL = "llama-3.1-8b"
PROFILE = "gpu-nodes"
H100 = "NVIDIA H100 80GB HBM3"
L40S = "NVIDIA L40S"


def write_result(folder: Path) -> Path:
    """The synthetic planned result, saved as ``roofline profile --json`` saves it."""
    path = folder / "result.json"
    path.write_text(json.dumps(planned_result().to_dict()), encoding="utf-8")
    return path


def _itl(alpha: float, beta: float, gamma: float, error: float) -> dict[str, float]:
    return {
        "itl_intercept_seconds": alpha,
        "itl_per_sequence_seconds": beta,
        "itl_per_sequence_context_token_seconds": gamma,
        "itl_max_relative_error": error,
    }


def _node(name: str, product: str, min_batch: int, model_plan: CompactModelPlan) -> NodeRecord:
    gpu = replace(device(0, name=product, min_batch=min_batch), models=(model_plan,))
    result = from_compact(profile(gpu), "h")
    return NodeRecord(name=name, gpus=1, state=NodeState.PROFILED, result=result)


def fleet_records() -> dict[str, NodeRecord]:
    """Two H100 nodes (the second slower) and one L40S node, each with Llama 3.1 8B planned at
    8K context under a 50 ms SLO."""
    common = {"context_tokens": 8192, "step_seconds": ()}
    records = [
        _node(
            "gpu-a",
            H100,
            128,
            plan(
                MODEL,
                min_batch=64,
                max_batch_by_memory=240,
                max_batch_by_latency=120,
                step_seconds_at_min_batch=0.021,
                step_seconds_at_max_batch=0.048,
                **common,
                **_itl(0.0125, 2.1e-5, 3.2e-8, 0.09),
            ),
        ),
        _node(
            "gpu-b",
            H100,
            128,
            plan(
                MODEL,
                min_batch=64,
                max_batch_by_memory=240,
                max_batch_by_latency=104,
                step_seconds_at_min_batch=0.023,
                step_seconds_at_max_batch=0.049,
                **common,
                **_itl(0.0131, 2.4e-5, 3.5e-8, 0.1),
            ),
        ),
        _node(
            "gpu-c",
            L40S,
            64,
            plan(
                MODEL,
                min_batch=None,
                max_batch_by_memory=40,
                max_batch_by_latency=24,
                step_seconds_at_min_batch=None,
                step_seconds_at_max_batch=0.047,
                **common,
                **_itl(0.0302, 9.0e-5, 1.3e-7, 0.12),
            ),
        ),
    ]
    return {r.name: r for r in records}


def status_profile() -> dict[str, Any]:
    """The RooflineProfile as ``kubectl get rp gpu-nodes -o json`` returns it."""
    models = ModelsView((ModelSpec(MODEL, preset="llama-3.1-8b", context_tokens=8192),))
    status = status_of(fleet_records(), models=models)
    document = {
        "apiVersion": "roofline.dev/v1alpha1",
        "kind": "RooflineProfile",
        "metadata": {"name": PROFILE},
        "spec": {
            "models": [{"name": MODEL, "preset": "llama-3.1-8b", "contextTokens": 8192}],
            "slo": {"interTokenLatency": "50ms"},
        },
        "status": status,
    }
    loaded: dict[str, Any] = json.loads(json.dumps(document))
    return loaded


def write_status(folder: Path) -> Path:
    path = folder / "profile.json"
    path.write_text(json.dumps(status_profile()), encoding="utf-8")
    return path


def class_plan(**changes: Any) -> ClassPlan:
    """One model's plan on one GPU class, as the targets read it."""
    base: dict[str, Any] = {
        "model": "m",
        "gpu_class": "G",
        "context_tokens": 4096,
        "tensor_parallel": 1,
        "min_batch": 16,
        "max_batch": 96,
        "max_batch_by_memory": 200,
        "max_batch_by_latency": 96,
        "kv_cache_tokens": 200 * 4096,
        "tokens_per_second_at_max_batch": 4000.0,
        "nodes": 1,
        "source": "s",
    }
    base.update(changes)
    return ClassPlan(**base)


#: The characters that end a YAML comment or line, or that a YAML reader refuses or a terminal
#: acts on: line feed, CR, NEL, the line and paragraph separators, NUL, ESC, DEL, tab, bidi
#: controls, zero-width and byte-order marks, a lone surrogate.
SEPARATORS = (
    "\n", "\r", "\x85", "\u2028", "\u2029", "\x00", "\x1b", "\x7f", "\t", "\u202e", "\u2066",
    "\u200b", "\ufeff", "\ud800",
)  # fmt: skip
#: Strings as a tampered status or file name may hold them: ordinary text with the separators
#: mixed in, and writable look-alikes of the real values.
hostile_text = st.one_of(
    st.text(st.sampled_from(SEPARATORS) | st.characters(), max_size=40),
    st.builds(
        "".join,
        st.lists(st.sampled_from([*SEPARATORS, "gpu-a", "NVIDIA H200", "  key: x", "# ", "-"])),
    ),
)


def string_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a string inside ``value``."""
    if isinstance(value, str):
        return [prefix]
    if isinstance(value, dict):
        return [p for key, child in value.items() for p in string_paths(child, (*prefix, key))]
    if isinstance(value, list):
        return [p for i, child in enumerate(value) for p in string_paths(child, (*prefix, i))]
    return []


def replaced(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    """A copy of ``document`` with the value at ``path`` replaced."""
    copy = json.loads(json.dumps(document))
    target = copy
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return copy
