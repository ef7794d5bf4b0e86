"""A RooflineProfile (``kubectl get rp NAME -o yaml``) or its bare status as an export source.

The status is read like anything that crosses a boundary: once, here, into bounded typed values,
every defect one :class:`SourceError` that names the field. Every string is matched whole
against its contract (a node's name, a label-value model name, a device name of printable
ASCII), so none can carry a separator or control character into the YAML, and every rate lies
where the targets' arithmetic stays finite. The profile's name becomes the
``roofline.dev/profile`` label value its nodes carry (the operator's ``label_safe``).

Each model's plan per GPU product class comes from ``status.models[].classes`` (the operator's
worst-of-class numbers and its slowest node's ITL model); the measured classes of nodes (for
Kueue flavors) from the listed ``status.nodes[]``, grouped by the product each node measured, the
class its ``roofline.dev/class`` label carries; a node that names no product yet is left out, a
malformed one refused. Pure module.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from roofline_cli.export.names import DNS_SUBDOMAIN
from roofline_cli.export.plans import ClassPlan, ExportSource, Itl, NodeClass, RequestRate
from roofline_operator.decide.labels import label_safe
from roofline_profiler.core import limits, plausibility
from roofline_profiler.core.load_plan import LIMITS
from roofline_profiler.core.weight_formats import KV_CACHE_DTYPES, parse_weight_format

#: A node's name, and a profile's: a DNS subdomain, matched whole.
NODE_NAME = DNS_SUBDOMAIN
#: ``spec.slo.interTokenLatency`` as the CRD's pattern allows it.
LATENCY = re.compile(r"([0-9]{1,9}(\.[0-9]{1,6})?(us|ms|s|m)){1,4}")
#: Most classes per model and nodes read: the CRD's own bound, and far more nodes than the
#: operator lists by default.
MAX_CLASSES = 16
MAX_NODES = 10_000
#: The largest KV-cache token count and tokens/s taken as real.
MAX_TOKENS = float(1 << 48)
#: The smallest tokens/s taken as real: a replica that needs over 15 minutes a token serves
#: nothing, and a demand divided by 5e-324 overflows.
MIN_RATE = 1e-3


class SourceError(ValueError):
    """A document that is not a usable RooflineProfile status; ``str()`` is one line."""


#: The longest weight format name (``gptq-int8-g256-asym``) with room to spare.
MAX_FORMAT_NAME = 32


def _list(value: Any, where: str, most: int) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise SourceError(f"{where} is not a list")
    if len(value) > most:
        raise SourceError(f"{where} has more than {most} entries")
    return value


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise SourceError(f"{where} is not an object")
    return value


def _checked(read: Any, where: str) -> Any:
    try:
        return read()
    except plausibility.ImplausibleValue as exc:
        raise SourceError(f"{where}: {exc}") from None


def _whole(entry: Mapping[str, Any], key: str, quantity: str, where: str) -> int | None:
    if entry.get(key) is None:
        return None
    return int(_checked(lambda: plausibility.integer(entry[key], quantity, key), where))


def _rate(entry: Mapping[str, Any], key: str, where: str) -> float | None:
    value = entry.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SourceError(f"{where}: {key} is not a number")
    if not MIN_RATE <= value <= MAX_TOKENS or not math.isfinite(value):
        raise SourceError(
            f"{where}: {key} {value!r} is not a positive rate from {MIN_RATE:g} to {MAX_TOKENS:g}"
        )
    return float(value)


def _itl(entry: Mapping[str, Any], where: str) -> Itl | None:
    keys = ("itlInterceptSeconds", "itlPerSequenceSeconds", "itlPerSequenceContextTokenSeconds")
    if any(entry.get(k) is None for k in keys):
        return None
    terms = [
        float(_checked(lambda k=k: plausibility.number(entry[k], "itl term", k), where))
        for k in keys
    ]
    error = entry.get("itlMaxRelativeError", 0.0)
    error = _checked(
        lambda: plausibility.number(error, "relative error", "itlMaxRelativeError"), where
    )
    node = entry.get("slowestNode")
    if node is not None:
        _checked(lambda: plausibility.text(node, NODE_NAME, "slowestNode"), where)
    measured_on = f"node {node}" if node is not None else where
    return Itl(terms[0], terms[1], terms[2], float(error), measured_on)


def _max_request_rate(entry: Mapping[str, Any], where: str) -> RequestRate | None:
    """A class's ``maxRequestRate``, checked as the operator checks it (``None`` when absent)."""
    if entry.get("maxRequestRate") is None:
        return None
    where = f"{where}.maxRequestRate"
    rate = _mapping(entry["maxRequestRate"], where)
    limited_by = rate.get("limitedBy")
    if limited_by not in LIMITS:
        raise SourceError(f"{where}: limitedBy is not one of {', '.join(LIMITS)}")
    return RequestRate(
        requests_per_second=float(
            _checked(
                lambda: plausibility.number(
                    rate.get("requestsPerSecond"), "request rate", "requestsPerSecond"
                ),
                where,
            )
        ),
        limited_by=str(limited_by),
        prompt_tokens=_whole(rate, "promptTokens", "context", where) or 1,
        output_tokens=_whole(rate, "outputTokens", "context", where) or 1,
    )


def _class_plan(model: Mapping[str, Any], name: str, raw: Any, where: str) -> ClassPlan:
    entry = _mapping(raw, where)
    product = _checked(
        lambda: plausibility.text(entry.get("product"), plausibility.DEVICE_NAME, "product"), where
    )
    by_memory = _whole(entry, "maxBatchByMemory", "batch bound", where)
    max_batch = _whole(entry, "maxBatch", "batch bound", where)
    if by_memory is None or max_batch is None:
        raise SourceError(f"{where}: maxBatch and maxBatchByMemory are required")
    context = _whole(model, "contextTokens", "context", f"status.models[{name}]") or 1
    kv_tokens = entry.get("kvCacheTokens", by_memory * context)
    if (
        isinstance(kv_tokens, bool)
        or not isinstance(kv_tokens, int)
        or not 0 <= kv_tokens <= MAX_TOKENS
    ):
        raise SourceError(f"{where}: kvCacheTokens is not a count of tokens up to {MAX_TOKENS:g}")
    nodes = entry.get("nodes", 0)
    if isinstance(nodes, bool) or not isinstance(nodes, int) or not 0 <= nodes <= MAX_NODES:
        raise SourceError(f"{where}: nodes is not a count of nodes")
    return ClassPlan(
        model=name,
        gpu_class=product,
        context_tokens=context,
        tensor_parallel=_whole(model, "tensorParallel", "tensor parallel", where) or 1,
        min_batch=_whole(entry, "minBatch", "min batch", where),
        max_batch=max_batch,
        max_batch_by_memory=by_memory,
        max_batch_by_latency=_whole(entry, "maxBatchByLatency", "batch bound", where),
        kv_cache_tokens=kv_tokens,
        tokens_per_second_at_max_batch=_rate(entry, "tokensPerSecondAtMaxBatch", where),
        nodes=nodes,
        source=f"{where} ({nodes} node(s))",
        itl=_itl(entry, where),
        max_request_rate=_max_request_rate(entry, where),
        weight_format=_weight_format(model, f"status.models[{name}]"),
        kv_cache_dtype=_kv_cache_dtype(model, f"status.models[{name}]"),
    )


def _weight_format(model: Mapping[str, Any], where: str) -> str:
    """A model's ``weightFormat`` (empty when absent), one the profiler names."""
    value = model.get("weightFormat")
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > MAX_FORMAT_NAME:
        raise SourceError(f"{where}.weightFormat is not a weight format's name")
    try:
        return parse_weight_format(value).name
    except ValueError:
        raise SourceError(f"{where}.weightFormat is not a weight format's name") from None


def _kv_cache_dtype(model: Mapping[str, Any], where: str) -> str:
    value = model.get("kvCacheDtype", "auto")
    if value not in KV_CACHE_DTYPES:
        raise SourceError(f"{where}.kvCacheDtype is not one of {', '.join(KV_CACHE_DTYPES)}")
    return str(value)


def _model_plans(status: Mapping[str, Any]) -> list[ClassPlan]:
    plans = []
    for i, raw in enumerate(_list(status.get("models"), "status.models", limits.MAX_MODELS)):
        model = _mapping(raw, f"status.models[{i}]")
        name = _checked(
            lambda m=model: plausibility.text(m.get("name"), plausibility.LABEL_VALUE, "name"),
            f"status.models[{i}]",
        )
        where = f"status.models[{name}].classes"
        for j, raw_class in enumerate(_list(model.get("classes"), where, MAX_CLASSES)):
            entry = _mapping(raw_class, f"{where}[{j}]")
            product = _checked(
                lambda e=entry: plausibility.text(
                    e.get("product"), plausibility.DEVICE_NAME, "product"
                ),
                f"{where}[{j}]",
            )
            plans.append(_class_plan(model, name, entry, f"{where}[{product}]"))
    return plans


def _node_classes(
    status: Mapping[str, Any], plans: Sequence[ClassPlan], accelerated: bool
) -> list[NodeClass]:
    """The listed nodes grouped by the class the operator labels them with: the label-safe name
    of the product each node's own pod measured (``roofline.dev/class``). A node that names no
    product has no class label to select it by and is left out."""
    groups: dict[str, list[tuple[str, str, int, Mapping[str, Any]]]] = {}
    for i, raw in enumerate(_list(status.get("nodes"), "status.nodes", MAX_NODES)):
        entry = _mapping(raw, f"status.nodes[{i}]")
        name = _checked(
            lambda e=entry: plausibility.text(e.get("name"), NODE_NAME, "name"),
            f"status.nodes[{i}]",
        )
        product = entry.get("product")
        if product is None:
            continue
        _checked(
            lambda p=product: plausibility.text(p, plausibility.DEVICE_NAME, "product"),
            f"status.nodes[{name}]",
        )
        gpus = _whole(entry, "gpus", "gpus", f"status.nodes[{name}]") or 1
        groups.setdefault(label_safe(product), []).append((name, product, gpus, entry))
    classes = []
    for label in sorted(groups):
        members = groups[label]
        product = members[0][1]
        rates: dict[str, float] = {}
        for plan in plans:
            node_rates = [_node_rate(e, plan.model, n) for n, _, _, e in members]
            known = [r for r in node_rates if r is not None]
            fallback = plan.tokens_per_second_at_max_batch
            if len(known) < len(node_rates) and plan.gpu_class == product and fallback:
                known.append(fallback)
            if known:
                rates[plan.model] = min(
                    known + ([rates[plan.model]] if plan.model in rates else [])
                )
        classes.append(
            NodeClass(
                label=label,
                product=product,
                nodes=tuple(n for n, _, _, _ in members),
                gpus=sum(g for _, _, g, _ in members),
                tokens_per_second=rates,
                accelerated=accelerated,
            )
        )
    return classes


def _node_rate(entry: Mapping[str, Any], model: str, node: str) -> float | None:
    for raw in _list(entry.get("models"), f"status.nodes[{node}].models", limits.MAX_MODELS):
        if isinstance(raw, Mapping) and raw.get("name") == model:
            return _rate(raw, "tokensPerSecondAtMaxBatch", f"status.nodes[{node}].models[{model}]")
    return None


def source_of_profile(document: Any, where: str) -> ExportSource:
    """The export source of a RooflineProfile object, or of its bare ``status``, read from
    ``where``; :class:`SourceError` when it holds no planned model."""
    if not isinstance(document, Mapping):
        raise SourceError("not a RooflineProfile or a status object")
    profile: str | None = None
    slo: str | None = None
    accelerated = True
    if document.get("kind") == "RooflineProfile":
        metadata = document.get("metadata")
        name = metadata.get("name") if isinstance(metadata, Mapping) else None
        if name is not None:
            profile = _checked(lambda: plausibility.text(name, NODE_NAME, "name"), "metadata")
        spec = document.get("spec")
        slo_spec = spec.get("slo") if isinstance(spec, Mapping) else None
        latency = slo_spec.get("interTokenLatency") if isinstance(slo_spec, Mapping) else None
        slo = latency if isinstance(latency, str) and LATENCY.fullmatch(latency) else None
        accelerated = not (isinstance(spec, Mapping) and spec.get("device") == "cpu")
        raw_status = document.get("status")
        status = {} if raw_status is None else _mapping(raw_status, "status")
    elif any(key in document for key in ("models", "nodes", "summary")):
        status = document
    else:
        raise SourceError("not a RooflineProfile or a status object")
    plans = _model_plans(status)
    if not plans:
        raise SourceError(
            "its status has no planned model (status.models[].classes): no node is profiled "
            "with spec.models yet, or the operator that wrote it predates per-class plans"
        )
    described = f"RooflineProfile {profile}" if profile else where
    return ExportSource(
        description=described,
        plans=tuple(plans),
        node_classes=tuple(_node_classes(status, plans, accelerated)),
        profile=None if profile is None else label_safe(profile),
        itl_slo=slo,
    )
