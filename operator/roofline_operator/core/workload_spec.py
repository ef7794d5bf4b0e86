"""The planned workload of a RooflineProfile: ``spec.workload`` (every request's prompt and output
length) and ``spec.slo.timeToFirstToken``, which with ``spec.slo.interTokenLatency`` bound the
largest request rate one replica sustains (``load_plan.MaxRate``).

They are profile-wide, as the ITL target is: the profiler pod takes one ``--prompt-tokens``,
``--output-tokens`` and ``--ttft-slo`` for all the models it plans. ``spec.workload`` may also
name the serving engine's scheduler limits, ``maxNumBatchedTokens`` and ``maxNumSeqs`` (vLLM's
``--max-num-batched-tokens`` and ``--max-num-seqs``: the prompt tokens one step takes and the
requests that run at once), which decide how the steps of a loaded replica fill; unset, the
profiler plans with the engine's defaults (docs/profiler.md). Like the other model fields
(``model_spec``), every rule of the CRD is repeated here, for API servers that do not run them,
and a violation is one line naming the field, for the ``InvalidSpec`` condition.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from roofline_operator.core.model_spec import CRD_SLO_UNITS, ModelSpecError
from roofline_profiler.core import limits, units

#: Longest TTFT target the CRD takes (``slo.timeToFirstToken``), in seconds: the profiler's
#: ``--ttft-slo`` bound, so that every target the CRD admits the pod accepts.
MAX_TTFT_SLO_SECONDS = limits.MAX_TTFT_SLO_SECONDS
#: Most tokens of a prompt or of an output: the longest context a model entry may plan for.
MAX_WORKLOAD_TOKENS = limits.MAX_CONTEXT_TOKENS
#: The scheduler limits' bounds: the profiler's for ``--max-num-batched-tokens`` and
#: ``--max-num-seqs``, so that every value the CRD admits the pod accepts.
MAX_BATCHED_TOKENS = limits.MAX_BATCHED_TOKENS
MAX_NUM_SEQS = limits.MAX_NUM_SEQS


@dataclass(frozen=True)
class PlannedWorkload:
    """``spec.workload``: every request's prompt and output length, in tokens, and the serving
    engine's scheduler limits where the profile names them (``None``: the engine's defaults)."""

    prompt_tokens: int
    output_tokens: int
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None


def _tokens(raw: Mapping[str, Any], key: str, upper: int = MAX_WORKLOAD_TOKENS) -> int:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= upper:
        raise ModelSpecError(f"spec.workload.{key} must be an integer in 1..{upper}, got {value!r}")
    return value


def _optional(raw: Mapping[str, Any], key: str, upper: int) -> int | None:
    return None if raw.get(key) is None else _tokens(raw, key, upper)


def parse_workload(raw: Any) -> PlannedWorkload | None:
    """``spec.workload``; both lengths are required once it is given (``None`` when unset), the
    scheduler limits optional."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ModelSpecError("spec.workload must be an object with promptTokens and outputTokens")
    return PlannedWorkload(
        _tokens(raw, "promptTokens"),
        _tokens(raw, "outputTokens"),
        _optional(raw, "maxNumBatchedTokens", MAX_BATCHED_TOKENS),
        _optional(raw, "maxNumSeqs", MAX_NUM_SEQS),
    )


def parse_ttft_slo(
    raw_slo: Any, workload: PlannedWorkload | None
) -> tuple[float | None, str | None]:
    """``spec.slo.timeToFirstToken`` as seconds and as written (``None`` when unset). A TTFT
    depends on the prompt's length, so the target needs ``spec.workload``."""
    if not isinstance(raw_slo, Mapping):
        return None, None  # a missing slo; a malformed one is model_spec.parse_slo's to refuse
    text = raw_slo.get("timeToFirstToken")
    if text is None or text == "":
        return None, None
    where = "spec.slo.timeToFirstToken"
    try:
        seconds = units.parse_duration(text, CRD_SLO_UNITS)
    except units.DurationError:
        raise ModelSpecError(f"{where} must be a duration such as 500ms, got {text!r}") from None
    if not 0 < seconds <= MAX_TTFT_SLO_SECONDS:
        raise ModelSpecError(
            f"{where} must be above 0 and at most {MAX_TTFT_SLO_SECONDS:g}s, got {text!r}"
        )
    if workload is None:
        raise ModelSpecError(f"{where} needs spec.workload (the prompt length it applies to)")
    return seconds, text


def workload_fields_for_hash(
    workload: PlannedWorkload | None, ttft_slo_seconds: float | None
) -> dict[str, Any]:
    """What of the workload changes a plan, for the spec digest; empty when unset, so that a
    profile without a workload keeps the digest it had before workloads existed (and one without
    scheduler limits the digest it had before those)."""
    fields: dict[str, Any] = {}
    if workload is not None:
        fields["workload"] = [workload.prompt_tokens, workload.output_tokens]
        if workload.max_num_batched_tokens is not None:
            fields["maxNumBatchedTokens"] = workload.max_num_batched_tokens
        if workload.max_num_seqs is not None:
            fields["maxNumSeqs"] = workload.max_num_seqs
    if ttft_slo_seconds is not None:
        fields["ttftSlo"] = ttft_slo_seconds
    return fields


def workload_arguments(
    workload: PlannedWorkload | None, ttft_slo_seconds: float | None
) -> list[str]:
    """The profiler's flags for the workload (the pod's command, in its models mode)."""
    if workload is None:
        return []
    arguments = [
        "--prompt-tokens",
        str(workload.prompt_tokens),
        "--output-tokens",
        str(workload.output_tokens),
    ]
    if ttft_slo_seconds is not None:
        arguments += ["--ttft-slo", f"{ttft_slo_seconds:g}s"]
    if workload.max_num_batched_tokens is not None:
        arguments += ["--max-num-batched-tokens", str(workload.max_num_batched_tokens)]
    if workload.max_num_seqs is not None:
        arguments += ["--max-num-seqs", str(workload.max_num_seqs)]
    return arguments
