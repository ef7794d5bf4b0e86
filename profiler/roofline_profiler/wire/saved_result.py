"""Reading a saved result document back (``roofline plan --from``): a file from elsewhere may hold
anything, so it is read once, here, into bounded values, and what is derived from it is checked.

1. The text: JSON without ``NaN`` or ``Infinity``, integers of at most
   :data:`~roofline_profiler.core.plausibility.MAX_INT_DIGITS` digits (Python refuses more than
   4300 with a bare ``ValueError``), nested at most :data:`MAX_RESULT_DEPTH` levels (counted by a
   scan before parsing, so neither the parser nor the schema check can run out of stack).
2. The published schema (``result.validate_document``).
3. Every number where the schema has one, as a float of magnitude at most :data:`MAX_MAGNITUDE`
   (an integer of 400 digits there is refused, not carried into ``float()``); every integer within
   :data:`MAX_INTEGER`, exact as a float. Numbers the schema leaves free (``environment``,
   ``telemetry``) are bounded alike.
4. What drives the maths of a re-plan, against the profiler's own limits and plausibility table:
   the sweep's batches and weight shape, each device's memory and peak (and each weight format's
   peak, which a quantized model's re-plan compares with), and every measured part of
   a model's decode step (its batch, context and time: a step of 0 s would divide by zero, a
   part at batch 10⁹ would be looked up in vain).
5. What is derived from those numbers (rates, summaries, the plans): :func:`check_derived` writes
   a result back and requires a document the schema accepts, every number finite.

Every refusal is an :class:`UnreadableResult` whose ``str()`` is one line naming where.

Pure module: no torch, no Kubernetes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import jsonschema

from roofline_profiler.core import limits, plausibility
from roofline_profiler.core.decode_model import ModelMeasurements
from roofline_profiler.core.errors import first_line
from roofline_profiler.wire.result import DeviceResult, ProfileResult, load_schema

#: Deepest nesting read: a result nests ten levels (free ``telemetry`` objects a few more).
MAX_RESULT_DEPTH = 64
#: Largest magnitude of any number a result carries. Its largest real numbers are FLOP/s
#: (≤ 10¹⁷, ``plausibility.RANGES``), bytes of memory and FLOPs of one workload (≤ 10¹³); far
#: below it, products and ratios of two of them stay finite too.
MAX_MAGNITUDE = 1e21
#: Largest magnitude of an integer: every one up to it is exact as a float.
MAX_INTEGER = 2**53


class UnreadableResult(ValueError):
    """A saved result that cannot be read or re-planned; ``str()`` is one line naming where."""


def _no_constant(constant: str) -> float:
    raise UnreadableResult(f"not a JSON result document ({constant} is no JSON number)")


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > plausibility.MAX_INT_DIGITS:
        raise UnreadableResult(f"not a JSON result document (an integer of {len(text)} digits)")
    return int(text)


def parse_result_text(text: str) -> Any:
    """Step 1: the JSON value of ``text``, bounded in depth and integer length."""
    if plausibility.nesting_depth(text, MAX_RESULT_DEPTH) > MAX_RESULT_DEPTH:
        raise UnreadableResult(f"not a JSON result document (nested over {MAX_RESULT_DEPTH} deep)")
    try:
        return json.loads(text, parse_constant=_no_constant, parse_int=_bounded_int)
    except json.JSONDecodeError as exc:
        raise UnreadableResult(f"not a JSON result document ({exc.msg})") from None


def _types(schema: Mapping[str, Any]) -> set[str]:
    declared = schema.get("type", ())
    return {declared} if isinstance(declared, str) else set(declared)


def _resolve(schema: Any, root: Mapping[str, Any]) -> Mapping[str, Any]:
    """``schema`` itself, or what its ``$ref`` (``#/definitions/...``) names."""
    while isinstance(schema, Mapping) and "$ref" in schema:
        target: Any = root
        for part in str(schema["$ref"]).lstrip("#/").split("/"):
            target = target[part]
        schema = target
    return schema if isinstance(schema, Mapping) else {}


def _fits(value: Any, schema: Mapping[str, Any]) -> bool:
    """Whether the JSON type of ``value`` is one ``schema`` declares (a branch of ``oneOf``)."""
    kinds = _types(schema)
    if not kinds or value is None:
        return not kinds or "null" in kinds
    if isinstance(value, bool):
        return "boolean" in kinds
    if isinstance(value, (int, float)):
        return bool(kinds & {"number", "integer"})
    if isinstance(value, str):
        return "string" in kinds
    return ("array" if isinstance(value, list) else "object") in kinds


def _shown(key: str) -> str:
    """A document's key as an error message names it: itself when printable, else escaped as in
    JSON, so that a key holding a line break or a control character never splits or colours
    the one line a usage error is."""
    return key if key.isprintable() else json.dumps(key)[1:-1]


def _number(value: int | float, kinds: set[str], where: str) -> int | float:
    if "integer" in kinds and "number" not in kinds:
        if isinstance(value, float) and not value.is_integer():
            raise UnreadableResult(f"not a roofline result ({where}: {value!r} is no integer)")
        if abs(value) > MAX_INTEGER:
            raise UnreadableResult(f"not a roofline result ({where}: an integer out of range)")
        return int(value)
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not abs(number) <= MAX_MAGNITUDE:
        raise UnreadableResult(f"not a roofline result ({where}: a number out of range)")
    return number if "number" in kinds else value


def bounded(value: Any, schema: Any, root: Mapping[str, Any], where: str = "") -> Any:
    """Step 3: ``value`` (valid against ``schema``) with every number bounded, numbers the schema
    declares as such read as floats."""
    node = _resolve(schema, root)
    for key in ("oneOf", "anyOf"):
        branches = [_resolve(b, root) for b in node.get(key, ())]
        node = next((b for b in branches if _fits(value, b)), node)
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return _number(value, _types(node), where or "the document")
    if isinstance(value, list):
        items = node.get("items", {})
        return [bounded(v, items, root, f"{where}/{i}") for i, v in enumerate(value)]
    properties = node.get("properties", {})
    extra = node.get("additionalProperties", {})
    extra = extra if isinstance(extra, Mapping) else {}
    return {
        key: bounded(
            v, properties.get(key, extra), root, f"{where}/{_shown(key)}" if where else _shown(key)
        )
        for key, v in value.items()
    }


def _plausible(check: Any, where: str) -> Any:
    try:
        return check()
    except (plausibility.ImplausibleValue, limits.LimitError) as exc:
        raise UnreadableResult(f"not a roofline result ({where}: {exc})") from None


def _check_measurements(m: ModelMeasurements, where: str) -> None:
    """Step 4 for one model: every measured part at a real batch and context, in a real time."""
    _plausible(lambda: plausibility.integer(m.tensor_parallel, "tensor parallel", "tp"), where)
    parts = [
        *m.head,
        *m.all_reduce,
        *(t for times in m.layer_bodies.values() for t in times),
        *(t for times in m.layer_glue.values() for t in times),
    ]
    for part in (*parts, *m.attention):
        _plausible(lambda p=part: plausibility.integer(p.batch, "batch", "batch"), where)
        _plausible(lambda p=part: plausibility.number(p.seconds, "step", "seconds"), where)
    for attention in m.attention:
        context = attention.context_tokens
        _plausible(lambda c=context: plausibility.integer(c, "context", "contextTokens"), where)
    if m.attention_roofline is not None:
        read = m.attention_roofline.read_bytes_per_second
        peak = m.attention_roofline.peak_flops_per_second
        _plausible(lambda: plausibility.number(read, "bandwidth", "readBytesPerSecond"), where)
        _plausible(lambda: plausibility.number(peak, "peak", "peakFlopsPerSecond"), where)


def _check_device(device: DeviceResult, where: str) -> None:
    """Step 4 for one device: what a re-plan reads of it."""
    memory = device.memory_bytes or 0
    _plausible(lambda: plausibility.integer(memory, "memory", "memoryBytes"), where)
    peak = device.peak_flops_per_second
    _plausible(lambda: plausibility.number(peak, "peak", "peakFlopsPerSecond"), where)
    for index, measured in enumerate(device.model_measurements):
        _check_measurements(measured, f"{where}/modelMeasurements/{index}")
    # A format's peak stands in for the device's in a quantized model's re-plan (``model_peak``).
    for index, fmt in enumerate(device.weight_formats):
        _plausible(
            lambda peak=fmt.peak.value: plausibility.number(peak, "peak", "peakFlopsPerSecond"),
            f"{where}/weightFormats/{index}",
        )


def check_inputs(result: ProfileResult) -> None:
    """Step 4: the values that drive the maths of a re-plan, within the profiler's limits."""
    _plausible(lambda: limits.check_batches(result.batches), "config/batches")
    _plausible(lambda: limits.check_shape(result.shape_k, result.shape_n), "config/shape")
    percent = result.min_batch_efficiency_percent
    _plausible(lambda: limits.check_efficiency_percent(percent), "config")
    for index, device in enumerate(result.devices):
        _check_device(device, f"devices/{index}")


def check_derived(result: ProfileResult) -> None:
    """Step 5: ``result`` written back is a document the schema accepts, every number finite
    (rates and summaries derived from the samples, the plans derived from the measurements)."""
    try:
        document = json.loads(json.dumps(result.to_dict(), allow_nan=False))
        jsonschema.validate(document, load_schema())
    except (ArithmeticError, ValueError) as exc:
        reason = first_line(exc, max_chars=120)
        raise UnreadableResult(f"a number derived from it is out of range ({reason})") from None
    except jsonschema.ValidationError as exc:
        where = "/".join(_shown(str(part)) for part in exc.absolute_path) or "the document"
        reason = first_line(exc.message, max_chars=120)
        raise UnreadableResult(
            f"a number derived from it is out of range ({where}: {reason})"
        ) from None


def read_saved_result(text: str) -> ProfileResult:
    """Steps 1 to 5: the result a saved document holds, or :class:`UnreadableResult`."""
    document = parse_result_text(text)
    schema = load_schema()
    try:
        jsonschema.validate(document, schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(_shown(str(part)) for part in exc.absolute_path) or "the document"
        reason = first_line(exc.message, max_chars=120)
        raise UnreadableResult(f"not a roofline result ({where}: {reason})") from None
    numbers = bounded(document, schema, schema)
    try:
        result = ProfileResult.from_dict(numbers)
    except (KeyError, TypeError, ValueError, ArithmeticError) as exc:
        reason = first_line(exc, max_chars=120)
        raise UnreadableResult(f"not a roofline result ({reason})") from None
    check_inputs(result)
    check_derived(result)
    return result
