"""``--target itl-configmap``: each model's ITL model per GPU class, for autoscalers and routers
that model inter-token latency linearly.

One ConfigMap, key ``itl.yaml``: per model its context and tensor-parallel degree, and per GPU
class ``interceptSeconds`` (α), ``perSequenceSeconds`` (β), ``perSequenceContextTokenSeconds``
(γ) of ``step(B, C) ≈ α + β·B + γ·B·C`` with the fit's ``maxRelativeError`` and where it was
measured (the class's slowest node), plus the step it predicts at the plan's batch. The format
is this project's own (docs/export.md); the same terms are the ``roofline_model_itl_*`` gauges.
Pure module.
"""

from __future__ import annotations

from typing import Any

from roofline_cli.export.commented import Note, render_document
from roofline_cli.export.options import ExportOptions, by_model
from roofline_cli.export.plans import ClassPlan, ExportSource

NAME = "roofline-itl"
KEY = "itl.yaml"


class NoItlModel(ValueError):
    """The source has no ITL model for the selected models."""


def _class_entry(plan: ClassPlan) -> Note:
    itl = plan.itl
    assert itl is not None
    step = itl.step_seconds(max(plan.max_batch, 1), plan.context_tokens)
    entry = {
        "gpuClass": plan.gpu_class,
        "interceptSeconds": itl.intercept_seconds,
        "perSequenceSeconds": itl.per_sequence_seconds,
        "perSequenceContextTokenSeconds": itl.per_sequence_context_token_seconds,
        "maxRelativeError": itl.max_relative_error,
        "measuredOn": itl.measured_on,
        "stepSecondsAtMaxBatch": Note(
            float(f"{step:.4g}"),
            f"α + β·{max(plan.max_batch, 1)} + γ·{max(plan.max_batch, 1)}·{plan.context_tokens}"
            f": the step at maxBatch and the planned context",
        ),
    }
    return Note(entry, f"from {plan.source}")


def build(source: ExportSource, options: ExportOptions) -> list[tuple[str, Any]]:
    models = []
    for model, plans in by_model(source.plans).items():
        fitted = [p for p in plans if p.itl is not None]
        if not fitted:
            continue
        models.append(
            {
                "model": model,
                "contextTokens": fitted[0].context_tokens,
                "tensorParallel": fitted[0].tensor_parallel,
                "classes": [_class_entry(p) for p in fitted],
            }
        )
    if not models:
        raise NoItlModel(
            "no ITL model in the source for these models (a result or status from before "
            "ITL models, or predictions that could not determine one)"
        )
    document = {
        "formula": "stepSeconds = interceptSeconds + perSequenceSeconds * B "
        "+ perSequenceContextTokenSeconds * B * C",
        "models": models,
    }
    text = render_document(document, f"ITL models from {source.description}.")
    metadata = {"name": NAME, "namespace": options.namespace}
    data = {KEY: Note(text, "α, β, γ per model and GPU class; B sequences of C tokens each")}
    header = f"ITL models (step(B, C) ≈ α + β·B + γ·B·C) from {source.description}."
    return [(header, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data})]
