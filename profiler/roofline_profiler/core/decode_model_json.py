"""The JSON form (camelCase) of a model's measured decode-step parts (``decode_model``), kept in
the result so that ``roofline plan`` can re-plan without the device. Results from before a field
was recorded read with that field's old meaning (``LINEAR_UNRECORDED``, measured attention).

Pure module: no torch, no numpy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any

from roofline_profiler.core.decode_model import (
    LINEAR_UNRECORDED,
    AttentionRoofline,
    AttentionTime,
    ComponentTime,
    ModelMeasurements,
)
from roofline_profiler.core.model_config import ModelArch
from roofline_profiler.core.prefill_parts import (
    PrefillAttentionTime,
    PrefillMeasurements,
    PrefillTokensTime,
)
from roofline_profiler.core.stats import Measurement


def _measurement_to_dict(m: Measurement | None) -> dict[str, Any] | None:
    if m is None:
        return None
    return {
        "label": m.label,
        "samplesSeconds": list(m.times),
        "warmupRuns": m.warmup_runs,
        **({"samplesRound": list(m.rounds)} if m.rounds else {}),
        **({"roundsCpuWait": list(m.cpu_waits)} if m.cpu_waits else {}),
    }


def _measurement_from_dict(d: Mapping[str, Any] | None) -> Measurement | None:
    if d is None:
        return None
    return Measurement(
        label=d["label"],
        times=tuple(d["samplesSeconds"]),
        warmup_runs=d["warmupRuns"],
        rounds=tuple(d.get("samplesRound", ())),
        cpu_waits=tuple(d.get("roundsCpuWait", ())),
    )


def _components_to_list(times: Sequence[ComponentTime]) -> list[dict[str, Any]]:
    return [
        {
            "batch": t.batch,
            "seconds": t.seconds,
            "measurement": _measurement_to_dict(t.measurement),
        }
        for t in times
    ]


def _components_from_list(items: Sequence[Mapping[str, Any]]) -> tuple[ComponentTime, ...]:
    return tuple(
        ComponentTime(
            batch=i["batch"],
            seconds=i["seconds"],
            measurement=_measurement_from_dict(i.get("measurement")),
        )
        for i in items
    )


_ARCH_KEYS = {
    f.name: "".join(
        part if n == 0 else part.capitalize() for n, part in enumerate(f.name.split("_"))
    )
    for f in fields(ModelArch)
}


#: Fields written only where they differ from their default, so that a model in its dtype reads
#: as it did before quantized formats were planned.
_DEFAULT_ONLY_WHEN_SET = {"weight_format": "", "kv_cache_dtype": "auto"}


def arch_to_dict(arch: ModelArch) -> dict[str, Any]:
    return {
        key: getattr(arch, name)
        for name, key in _ARCH_KEYS.items()
        if _DEFAULT_ONLY_WHEN_SET.get(name, ...) != getattr(arch, name)
    }


def arch_from_dict(d: Mapping[str, Any]) -> ModelArch:
    return ModelArch(**{name: d[key] for name, key in _ARCH_KEYS.items() if key in d})


def measurements_to_dict(m: ModelMeasurements) -> dict[str, Any]:
    return {
        "architecture": arch_to_dict(m.arch),
        "dtype": m.dtype,
        "tensorParallel": m.tensor_parallel,
        "layerBodies": {kind: _components_to_list(t) for kind, t in m.layer_bodies.items()},
        **(
            {"layerGlue": {kind: _components_to_list(t) for kind, t in m.layer_glue.items()}}
            if m.layer_glue
            else {}
        ),
        "head": _components_to_list(m.head),
        "headScale": m.head_scale,
        "attention": [
            {
                "batch": a.batch,
                "contextTokens": a.context_tokens,
                "seconds": a.seconds,
                "extrapolated": a.extrapolated,
                "measurement": _measurement_to_dict(a.measurement),
            }
            for a in m.attention
        ],
        "allReduce": _components_to_list(m.all_reduce),
        "allReduceMeasured": m.all_reduce_measured,
        "notes": list(m.notes),
        "linear": m.linear,
        **({"weightKernel": m.weight_kernel} if m.weight_kernel else {}),
        "attentionMethod": m.attention_method,
        **({"attentionKernel": m.attention_kernel} if m.attention_kernel else {}),
        **(
            {
                "attentionRoofline": {
                    "readBytesPerSecond": m.attention_roofline.read_bytes_per_second,
                    "peakFlopsPerSecond": m.attention_roofline.peak_flops_per_second,
                }
            }
            if m.attention_roofline
            else {}
        ),
        **({"prefill": prefill_to_dict(m.prefill)} if m.prefill else {}),
    }


def _tokens_to_list(times: Sequence[PrefillTokensTime]) -> list[dict[str, Any]]:
    return [
        {
            "tokens": t.tokens,
            "seconds": t.seconds,
            "measurement": _measurement_to_dict(t.measurement),
        }
        for t in times
    ]


def _tokens_from_list(items: Sequence[Mapping[str, Any]]) -> tuple[PrefillTokensTime, ...]:
    return tuple(
        PrefillTokensTime(i["tokens"], i["seconds"], _measurement_from_dict(i.get("measurement")))
        for i in items
    )


def prefill_to_dict(p: PrefillMeasurements) -> dict[str, Any]:
    return {
        "layerBodies": {kind: _tokens_to_list(t) for kind, t in p.layer_bodies.items()},
        "layerGlue": {kind: _tokens_to_list(t) for kind, t in p.layer_glue.items()},
        "attention": [
            {
                "promptTokens": a.prompt_tokens,
                "seconds": a.seconds,
                "measurement": _measurement_to_dict(a.measurement),
            }
            for a in p.attention
        ],
        "attentionSource": p.attention_source,
    }


def prefill_from_dict(d: Mapping[str, Any] | None) -> PrefillMeasurements | None:
    if d is None:
        return None
    return PrefillMeasurements(
        layer_bodies={kind: _tokens_from_list(t) for kind, t in d["layerBodies"].items()},
        layer_glue={kind: _tokens_from_list(t) for kind, t in d.get("layerGlue", {}).items()},
        attention=tuple(
            PrefillAttentionTime(
                a["promptTokens"], a["seconds"], _measurement_from_dict(a.get("measurement"))
            )
            for a in d["attention"]
        ),
        attention_source=d["attentionSource"],
    )


def measurements_from_dict(d: Mapping[str, Any]) -> ModelMeasurements:
    return ModelMeasurements(
        arch=arch_from_dict(d["architecture"]),
        dtype=d["dtype"],
        tensor_parallel=d["tensorParallel"],
        layer_bodies={kind: _components_from_list(t) for kind, t in d["layerBodies"].items()},
        layer_glue={kind: _components_from_list(t) for kind, t in d.get("layerGlue", {}).items()},
        head=_components_from_list(d["head"]),
        head_scale=d["headScale"],
        attention=tuple(
            AttentionTime(
                batch=a["batch"],
                context_tokens=a["contextTokens"],
                seconds=a["seconds"],
                extrapolated=a["extrapolated"],
                measurement=_measurement_from_dict(a.get("measurement")),
            )
            for a in d["attention"]
        ),
        all_reduce=_components_from_list(d["allReduce"]),
        all_reduce_measured=d["allReduceMeasured"],
        notes=tuple(d.get("notes", ())),
        linear=d.get("linear", LINEAR_UNRECORDED),
        weight_kernel=d.get("weightKernel", ""),
        attention_kernel=d.get("attentionKernel", ""),
        attention_roofline=_roofline_from_dict(d.get("attentionRoofline")),
        prefill=prefill_from_dict(d.get("prefill")),
    )


def _roofline_from_dict(d: Mapping[str, Any] | None) -> AttentionRoofline | None:
    if d is None:
        return None
    return AttentionRoofline(
        read_bytes_per_second=d["readBytesPerSecond"],
        peak_flops_per_second=d["peakFlopsPerSecond"],
    )
