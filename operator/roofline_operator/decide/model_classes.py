"""Each model's plan per GPU product class: ``status.models[].classes``.

A threshold written for a class of nodes (an autoscaler's per-replica batch, a gateway's KV-cache
utilisation, a quota's tokens/s) must hold on every node of the class, so a class's numbers are
its nodes' worst: the largest ``minBatch``, the smallest maxima and tokens/s. The ITL model is not
folded term by term but taken whole from the class's **slowest node**: the node whose ITL model
predicts the longest step at the class's largest ``maxBatch`` and the model's context, the point
where the class will run when busy. Its name is kept, and its terms come with its fit's error.
The largest request rate per replica (``maxRequestRate``) is the slowest node's by that rate,
with its ``limitedBy`` and workload, and only when every node of the class has one.

A node's class is its product (``status.nodes[].product``: the worst GPU's). Classes are listed
by product name, at most :data:`MAX_CLASSES` per model, so that the status stays bounded on a
fleet with many products.

Pure module: no Kopf, no Kubernetes client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from roofline_operator.core.model_loads import MAX_REQUEST_RATE_KEY, slowest_rate
from roofline_operator.core.model_plans import is_planned

#: Most classes listed per model.
MAX_CLASSES = 16
#: The keys of a node's entry that make up its ITL model, in the order of the terms.
ITL_KEYS = ("itlInterceptSeconds", "itlPerSequenceSeconds", "itlPerSequenceContextTokenSeconds")
ITL_ERROR_KEY = "itlMaxRelativeError"
#: A class's numbers: each the worst over the class's nodes, as ``(key, fold)``.
WORST_OF = (
    ("minBatch", max),
    ("maxBatch", min),
    ("maxBatchByMemory", min),
    ("maxBatchByLatency", min),
    ("kvCacheTokens", min),
    ("tokensPerSecondAtMaxBatch", min),
)


def itl_step(entry: Mapping[str, Any], batch: float, context_tokens: float) -> float | None:
    """The step an entry's ITL model predicts; ``None`` for an entry without one."""
    terms = [entry.get(key) for key in ITL_KEYS]
    alpha, beta, gamma = (t if isinstance(t, (int, float)) else None for t in terms)
    if alpha is None or beta is None or gamma is None:
        return None
    return alpha + beta * batch + gamma * batch * context_tokens


def _slowest(planned: Sequence[tuple[str, Mapping[str, Any]]]) -> tuple[str, Mapping[str, Any]]:
    """The node whose ITL model is slowest at the class's largest ``maxBatch``."""
    batch = max(max(int(e.get("maxBatch", 1)), 1) for _, e in planned)

    def step(item: tuple[str, Mapping[str, Any]]) -> tuple[float, str]:
        name, entry = item
        value = itl_step(entry, batch, int(entry.get("contextTokens", 1)))
        # Slowest first; nodes without a model last; then by name, so the choice is stable.
        return (-(value if value is not None else -1.0), name)

    return min(planned, key=step)


def class_entry(product: str, planned: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """One class of one model from its nodes' ``(name, planned entry)``."""
    item: dict[str, Any] = {"product": product, "nodes": len(planned)}
    for key, fold in WORST_OF:
        values = [e[key] for _, e in planned if key in e]
        if values and (key != "minBatch" or len(values) == len(planned)):
            item[key] = fold(values)
    rate = slowest_rate([e.get(MAX_REQUEST_RATE_KEY) for _, e in planned])
    if rate is not None:
        item[MAX_REQUEST_RATE_KEY] = rate
    name, slowest = _slowest(planned)
    if itl_step(slowest, 1, 1) is not None:
        item["slowestNode"] = name
        for key in (*ITL_KEYS, ITL_ERROR_KEY):
            if key in slowest:
                item[key] = slowest[key]
    return item


def classes(
    model: str, nodes: Sequence[tuple[str, str, Sequence[Mapping[str, Any]]]]
) -> list[dict[str, Any]]:
    """``status.models[].classes`` of ``model`` from every node's ``(name, product, entries)``."""
    by_product: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for name, product, entries in nodes:
        for entry in entries:
            if entry.get("name") == model and is_planned(entry):
                by_product.setdefault(product, []).append((name, entry))
    return [class_entry(p, by_product[p]) for p in sorted(by_product)[:MAX_CLASSES]]


def add_classes(
    summary: Sequence[dict[str, Any]],
    nodes: Sequence[tuple[str, str, Sequence[Mapping[str, Any]]]],
) -> None:
    """Each model of ``summary`` with its ``classes`` (none for a model no node planned)."""
    for item in summary:
        found = classes(item["name"], nodes)
        if found:
            item["classes"] = found
