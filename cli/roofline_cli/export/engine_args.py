"""``--target engine-args``: the engines' flags as a ConfigMap, or as a JSON patch of a Deployment.

From a saved result the flags are the plan's own ``engineSettings`` (``serving_flags.py``, each
flag's source in docs/serving-flags.md), memory fractions included. A status keeps no memory
split, so from a status the flags are those the bounds alone decide (batch, context, tensor
parallel); the engines' own defaults then size their memory, and the comment says so.

The ConfigMap holds each engine's flags as one line (``$(VAR)`` expansion in a container's
``args`` keeps it one argument, so start the engine through ``sh -c "exec vllm serve M
$VLLM_ARGS"`` with the key in ``env``). The patch (``kubectl patch deployment D --type json
--patch-file F``) appends the flags to the container's ``args``: the engines' parsers take the
last value of a repeated flag, so the plan's win over earlier ones. Pure module.
"""

from __future__ import annotations

from typing import Any

from roofline_cli.export.commented import Note
from roofline_cli.export.options import (
    ENGINES,
    ExportOptions,
    by_model,
    classes_note,
    object_name,
    safest,
)
from roofline_cli.export.plans import ClassPlan, ExportSource
from roofline_profiler.core import serving_flags

Document = tuple[str, Any]


def flags_from_bounds(plan: ClassPlan) -> dict[str, tuple[str, ...]]:
    """Each engine's flags that the plan's batch, context, tensor-parallel degree, weight format
    and KV-cache dtype decide, as ``serving_flags.engine_settings`` writes them (without the
    memory fractions)."""
    batch, context, tp = max(1, plan.max_batch), plan.context_tokens, plan.tensor_parallel
    tokens = serving_flags.DEFAULT_MAX_NUM_BATCHED_TOKENS
    concurrency = serving_flags.TGI_CONCURRENCY_PER_SEQUENCE * batch
    settings = {
        "vllm": (f"--max-num-seqs={batch}", f"--max-model-len={context}"),
        "sglang": (f"--max-running-requests={batch}", f"--context-length={context}"),
        "tgi": (
            f"--max-batch-total-tokens={batch * context}",
            f"--max-batch-size={batch}",
            f"--max-concurrent-requests={concurrency}",
            f"--max-total-tokens={context}",
            f"--max-input-tokens={max(1, context - 1)}",
        ),
        "tensorrtLlm": (
            f"--max_batch_size={batch}",
            f"--max_num_tokens={tokens}",
            f"--max_seq_len={context}",
        ),
    }
    if tp > 1:
        settings = {
            name: (*flags, f"{serving_flags.TENSOR_PARALLEL_FLAGS[name]}={tp}")
            for name, flags in settings.items()
        }
    formats = serving_flags.served_format_flags(plan.weight_format, plan.kv_cache_dtype)
    return {name: (*flags, *formats.get(name, ())) for name, flags in settings.items()}


def flags_of(plan: ClassPlan) -> tuple[dict[str, tuple[str, ...]], str]:
    """The plan's flags per engine and how they were obtained."""
    if plan.engine_flags is not None:
        return dict(plan.engine_flags), (
            "the plan's engineSettings: batch maxBatch, context contextTokens and the plan's KV "
            "budget in each engine's memory terms (docs/serving-flags.md)"
        )
    return flags_from_bounds(plan), (
        f"batch maxBatch {plan.max_batch}, context {plan.context_tokens}, tensor parallel "
        f"{plan.tensor_parallel}; a status keeps no memory split, so the memory fractions stay "
        "at the engines' defaults (export from the saved result for them)"
    )


def _configmap(plan: ClassPlan, options: ExportOptions) -> Document:
    flags, how = flags_of(plan)
    data = {
        cli_name: Note(
            " ".join(flags[key]),
            f"{cli_name} flags for {plan.model} on {plan.gpu_class}, from {plan.source}: {how}.",
        )
        for cli_name, key in ENGINES.items()
    }
    name = object_name(f"{plan.model}-{plan.gpu_class}-engine-args")
    header = (
        f"The engines' flags for {plan.model} on {plan.gpu_class}: one line per engine, for an "
        "env var of the serving container (sh -c 'exec vllm serve MODEL $VLLM_ARGS')."
    )
    metadata = {
        "name": name,
        "namespace": options.namespace,
        "labels": {"app.kubernetes.io/managed-by": "roofline-export"},
    }
    return header, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}


def _patch(plans: list[ClassPlan], options: ExportOptions) -> list[Note]:
    chosen = safest(plans)
    flags, how = flags_of(chosen)
    path = f"/spec/template/spec/containers/{options.container_index}/args/-"
    return [
        Note(
            {"op": "add", "path": path, "value": flag},
            f"{options.engine} {flag.split('=')[0]}: from {chosen.source} ({how}); "
            f"{classes_note(plans, chosen)}",
        )
        for flag in flags[ENGINES[options.engine]]
    ]


class OneModelOnly(ValueError):
    """A JSON patch patches one Deployment: one model."""


def build(source: ExportSource, options: ExportOptions) -> list[Document]:
    """ConfigMaps (one per model and class), or the JSON patch of one model's Deployment."""
    if options.form == "configmap":
        return [_configmap(plan, options) for plan in source.plans]
    models = by_model(source.plans)
    if len(models) > 1:
        raise OneModelOnly(
            f"--form patch patches one Deployment, and {', '.join(models)} are planned: "
            "pick one with --model"
        )
    ((model, plans),) = models.items()
    deployment = options.deployment or object_name(model)
    header = (
        f"{options.engine} flags for {model}: kubectl -n {options.namespace} patch deployment "
        f"{deployment} --type json --patch-file THIS_FILE (appends to container "
        f"{options.container_index}'s args; the last value of a repeated flag wins)."
    )
    return [(header, _patch(plans, options))]
