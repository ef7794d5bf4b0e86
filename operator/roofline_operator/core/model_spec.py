"""The model fields of a RooflineProfile's spec: ``models``, ``slo``, ``gpuHourCost``.

The CRD's schema and CEL rules check these at admission; an API server that does not run them
(an old cluster, a schema-less emulator) hands them over unchecked, so every rule is repeated here
and a violation is one line naming the field, for the ``InvalidSpec`` condition. Whether a
model's config is usable is not a spec error: that fails the model alone
(``roofline_operator.decide.model_sources``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from roofline_profiler.core import limits, units
from roofline_profiler.core.weight_formats import KV_CACHE_DTYPES, parse_weight_format

DEFAULT_CONFIG_MAP_KEY = "config.json"
#: Units of ``slo.interTokenLatency``, as the CRD's pattern allows.
CRD_SLO_UNITS = ("us", "ms", "s", "m")

_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_PRESET = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_CONFIG_MAP_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
_CONFIG_MAP_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_COST = re.compile(r"[0-9]{1,9}(\.[0-9]{1,6})?")
#: ``spec.models[].weightFormat``: the names ``parse_weight_format`` reads, as the CRD's pattern
#: spells them (a group size only for AWQ and GPTQ, ``-asym`` only for GPTQ; no leading zeros).
WEIGHT_FORMAT_PATTERN = (
    "^(awq-int4(-g(32|64|128|256))?|gptq-int(4|8)(-g(32|64|128|256))?(-asym)?|int8-w8a8|fp8-w8a8)$"
)
_WEIGHT_FORMAT = re.compile(WEIGHT_FORMAT_PATTERN)
#: The longest ``weightFormat`` the pattern admits (``gptq-int4-g128-asym``): the CRD's maxLength.
MAX_WEIGHT_FORMAT_CHARS = 19
DEFAULT_KV_CACHE_DTYPE = "auto"


class ModelSpecError(ValueError):
    """A model field the schema should have rejected; ``str()`` names the field."""


@dataclass(frozen=True)
class ModelSpec:
    """One entry of ``spec.models``, defaults applied; exactly one source is set."""

    name: str
    preset: str | None = None
    config: Mapping[str, Any] | None = None
    #: ``(name, key)`` of a ConfigMap in the profiler namespace.
    config_map: tuple[str, str] | None = None
    context_tokens: int = limits.DEFAULT_CONTEXT_TOKENS
    tensor_parallel: int = limits.DEFAULT_TENSOR_PARALLEL
    #: ``weightFormat``, as ``WeightFormat.name`` spells it (``awq-int4`` reads
    #: ``awq-int4-g128``); ``None``: as the config declares.
    weight_format: str | None = None
    #: ``kvCacheDtype``: vLLM's ``--kv-cache-dtype`` (``auto``: the model's dtype).
    kv_cache_dtype: str = DEFAULT_KV_CACHE_DTYPE

    def where(self, index: int) -> str:
        """The field path of this model's source, as messages name it."""
        if self.preset is not None:
            return f"spec.models[{index}].preset"
        source = "config" if self.config is not None else "configMapRef"
        return f"spec.models[{index}].{source}"


def _bounded_int(raw: Mapping[str, Any], key: str, default: int, hi: int, where: str) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= hi:
        raise ModelSpecError(f"{where}.{key} must be an integer in 1..{hi}, got {value!r}")
    return value


def _config_map(raw: Any, where: str) -> tuple[str, str]:
    if not isinstance(raw, Mapping):
        raise ModelSpecError(f"{where} must be an object with a name")
    name, key = raw.get("name"), raw.get("key") or DEFAULT_CONFIG_MAP_KEY
    if not isinstance(name, str) or len(name) > 253 or not _CONFIG_MAP_NAME.fullmatch(name):
        raise ModelSpecError(f"{where}.name must be a ConfigMap name, got {name!r}")
    if not isinstance(key, str) or len(key) > 253 or not _CONFIG_MAP_KEY.fullmatch(key):
        raise ModelSpecError(f"{where}.key must be a ConfigMap key, got {key!r}")
    return name, key


def _weight_format(raw: Mapping[str, Any], where: str) -> str | None:
    value = raw.get("weightFormat")
    if value is None:
        return None
    if not isinstance(value, str) or not _WEIGHT_FORMAT.fullmatch(value):
        raise ModelSpecError(
            f"{where}.weightFormat must be a weight format such as awq-int4-g128, "
            f"gptq-int8-g64-asym, int8-w8a8 or fp8-w8a8, got {_shown(value)}"
        )
    return parse_weight_format(value).name


def _kv_cache_dtype(raw: Mapping[str, Any], where: str) -> str:
    value = raw.get("kvCacheDtype")
    if value is None:
        return DEFAULT_KV_CACHE_DTYPE
    if not isinstance(value, str) or value not in KV_CACHE_DTYPES:
        raise ModelSpecError(
            f"{where}.kvCacheDtype must be one of {', '.join(KV_CACHE_DTYPES)}, got {_shown(value)}"
        )
    return value


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _model(raw: Any, index: int) -> ModelSpec:
    where = f"spec.models[{index}]"
    if not isinstance(raw, Mapping):
        raise ModelSpecError(f"{where} must be an object")
    name = raw.get("name")
    if not isinstance(name, str) or not name or len(name) > 63 or not _LABEL_VALUE.fullmatch(name):
        raise ModelSpecError(f"{where}.name must be a label value (1..63 characters), got {name!r}")
    sources = [key for key in ("preset", "config", "configMapRef") if raw.get(key) is not None]
    if len(sources) != 1:
        raise ModelSpecError(f"{where}: a model needs exactly one of preset, config, configMapRef")
    preset = raw.get("preset")
    if preset is not None and (not isinstance(preset, str) or not _PRESET.fullmatch(preset)):
        raise ModelSpecError(f"{where}.preset must be a preset name, got {preset!r}")
    config = raw.get("config")
    if config is not None and not isinstance(config, Mapping):
        raise ModelSpecError(f"{where}.config must be an object (the fields of a config.json)")
    ref = raw.get("configMapRef")
    return ModelSpec(
        name=name,
        preset=preset,
        config=dict(config) if config is not None else None,
        config_map=_config_map(ref, f"{where}.configMapRef") if ref is not None else None,
        context_tokens=_bounded_int(
            raw, "contextTokens", limits.DEFAULT_CONTEXT_TOKENS, limits.MAX_CONTEXT_TOKENS, where
        ),
        tensor_parallel=_bounded_int(
            raw, "tensorParallel", limits.DEFAULT_TENSOR_PARALLEL, limits.MAX_TENSOR_PARALLEL, where
        ),
        weight_format=_weight_format(raw, where),
        kv_cache_dtype=_kv_cache_dtype(raw, where),
    )


def parse_models(raw: Any) -> tuple[ModelSpec, ...]:
    """``spec.models``: at most :data:`limits.MAX_MODELS`, names unique (the CRD's list-map key)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ModelSpecError("spec.models must be a list")
    if len(raw) > limits.MAX_MODELS:
        raise ModelSpecError(
            f"spec.models has {len(raw)} models, at most {limits.MAX_MODELS} are allowed"
        )
    models = tuple(_model(item, i) for i, item in enumerate(raw))
    seen: set[str] = set()
    for i, model in enumerate(models):
        if model.name in seen:
            raise ModelSpecError(f"spec.models[{i}].name {model.name!r} is used twice")
        seen.add(model.name)
    return models


def parse_slo(raw: Any) -> tuple[float | None, str | None]:
    """``spec.slo.interTokenLatency`` as seconds and as written (``None`` when unset)."""
    if raw is None:
        return None, None
    if not isinstance(raw, Mapping):
        raise ModelSpecError("spec.slo must be an object")
    text = raw.get("interTokenLatency")
    if text is None or text == "":
        return None, None
    where = "spec.slo.interTokenLatency"
    try:
        seconds = units.parse_duration(text, CRD_SLO_UNITS)
    except units.DurationError:
        raise ModelSpecError(f"{where} must be a duration such as 50ms, got {text!r}") from None
    if not 0 < seconds <= limits.MAX_ITL_SLO_SECONDS:
        raise ModelSpecError(
            f"{where} must be above 0 and at most {limits.MAX_ITL_SLO_SECONDS:g}s, got {text!r}"
        )
    return seconds, text


def parse_cost(raw: Any) -> Decimal | None:
    """``spec.gpuHourCost``: a decimal string, never a float (the schema has no floats)."""
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str) or not _COST.fullmatch(raw):
        raise ModelSpecError(f'spec.gpuHourCost must be a decimal such as "2.50", got {raw!r}')
    return Decimal(raw)


def model_fields_for_hash(
    models: tuple[ModelSpec, ...], slo_seconds: float | None, cost: Decimal | None
) -> dict[str, Any]:
    """What of the model fields changes a plan, for the spec digest; empty without models, so
    that a profile without models keeps the digest it had before models existed."""
    if not models:
        return {}
    return {
        "models": [
            {
                "name": m.name,
                "preset": m.preset,
                "config": m.config,
                "configMap": m.config_map,
                "context": m.context_tokens,
                "tp": m.tensor_parallel,
                **_served_for_hash(m),
            }
            for m in models
        ],
        "slo": slo_seconds,
        "cost": str(cost) if cost is not None else None,
    }


def _served_for_hash(model: ModelSpec) -> dict[str, str]:
    """``weightFormat`` and ``kvCacheDtype`` where not the defaults, so that a profile written
    before they existed keeps its digest (and its nodes their plans)."""
    served = {}
    if model.weight_format is not None:
        served["weightFormat"] = model.weight_format
    if model.kv_cache_dtype != DEFAULT_KV_CACHE_DTYPE:
        served["kvCacheDtype"] = model.kv_cache_dtype
    return served
