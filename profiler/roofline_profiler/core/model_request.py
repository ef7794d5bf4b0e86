"""``roofline profile --models-json`` / ``--models-file``: the models a profiler pod plans, each
with its own context and tensor-parallel degree.

The operator checks every model before it starts a pod and passes only valid ones, configs inline
(a ``configMapRef`` already read), in a file the pod mounts from a ConfigMap (argv would cap the
configs' size), so the pod needs no API access:
``[{"name": ..., "preset": ... | "config": {...}, "contextTokens": N, "tensorParallel": N,
"weightFormat": ..., "kvCacheDtype": ...}]``, the last two optional and applied as the command
line's ``--weight-format`` and ``--kv-cache-dtype`` are (``models.served_in``).
The ``name`` becomes the plan's name (the ``model`` label of the metrics), whatever the preset.

Pure module: no torch, no numpy.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from roofline_profiler.core import limits
from roofline_profiler.core.errors import UsageError
from roofline_profiler.core.model_config import PRESETS, ModelArch, ModelError, bounded_int
from roofline_profiler.core.models import ServingFields, UnknownPreset, checked_model, served_in

#: Longest ``weightFormat`` or ``kvCacheDtype`` read (the longest name, ``gptq-int8-g128-asym``,
#: has 19 characters), so a message that shows an unknown one stays one short line.
MAX_NAME_CHARS = 32


class ModelsJsonError(UsageError):
    """A ``--models-json`` argument that cannot be planned; ``str()`` is one line."""


@dataclass(frozen=True)
class ModelEntry:
    arch: ModelArch
    context_tokens: int
    tensor_parallel: int


def _bounded(entry: Mapping[str, Any], key: str, default: int, hi: int, where: str) -> int:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= hi:
        raise ModelsJsonError(f"{where}.{key} must be an integer in 1..{hi}, got {value!r}")
    return value


def _entry(raw: Any, index: int) -> ModelEntry:
    where = f"--models-json[{index}]"
    if not isinstance(raw, Mapping):
        raise ModelsJsonError(f"{where} must be an object")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ModelsJsonError(f"{where}.name must be a non-empty string")
    preset, config = raw.get("preset"), raw.get("config")
    if (preset is None) == (config is None):
        raise ModelsJsonError(f"{where} needs exactly one of preset or config")
    if config is not None and not isinstance(config, Mapping):
        raise ModelsJsonError(f"{where}.config must be an object")
    tp = _bounded(
        raw, "tensorParallel", limits.DEFAULT_TENSOR_PARALLEL, limits.MAX_TENSOR_PARALLEL, where
    )
    source = f"{where}.preset" if preset is not None else f"{where}.config"
    try:
        arch = checked_model(name, preset, config, tp, source=source)
    except UnknownPreset:
        known = ", ".join(sorted(PRESETS))
        raise ModelsJsonError(f"{where}.preset {preset!r} is unknown (presets: {known})") from None
    except ModelError as exc:
        raise ModelsJsonError(str(exc)) from None
    fields = ServingFields(source, f"{where}.weightFormat", f"{where}.kvCacheDtype")
    try:
        arch = served_in(
            arch,
            _short_text(raw, "weightFormat", where),
            _short_text(raw, "kvCacheDtype", where),
            fields,
        )
    except ModelError as exc:
        raise ModelsJsonError(str(exc)) from None
    context = _bounded(
        raw, "contextTokens", limits.DEFAULT_CONTEXT_TOKENS, limits.MAX_CONTEXT_TOKENS, where
    )
    return ModelEntry(arch, context, tp)


def _short_text(entry: Mapping[str, Any], key: str, where: str) -> str | None:
    """A name field (``weightFormat``, ``kvCacheDtype``): absent, or a string of at most
    :data:`MAX_NAME_CHARS` characters, which :func:`served_in` reads."""
    value = entry.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_NAME_CHARS:
        raise ModelsJsonError(
            f"{where}.{key} must be a string of at most {MAX_NAME_CHARS} characters"
        )
    return value


def read_models_file(path: str) -> tuple[ModelEntry, ...]:
    """``--models-file``: :func:`parse_models_json` of a file of at most
    ``limits.MAX_MODELS_FILE_BYTES`` (checked before reading it whole)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(limits.MAX_MODELS_FILE_BYTES + 1)
    except OSError as exc:
        raise ModelsJsonError(f"--models-file {path}: {exc.strerror or exc}") from None
    if len(data) > limits.MAX_MODELS_FILE_BYTES:
        raise ModelsJsonError(
            f"--models-file {path}: more than {limits.MAX_MODELS_FILE_BYTES} bytes"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ModelsJsonError(f"--models-file {path}: not UTF-8 text") from None
    return parse_models_json(text)


def parse_models_json(text: str) -> tuple[ModelEntry, ...]:
    """Read and check every model; names must be unique (they name the plans)."""
    try:
        raw = json.loads(text, parse_int=bounded_int)
    except json.JSONDecodeError as exc:
        raise ModelsJsonError(
            f"--models-json is not JSON (column {exc.colno}: {exc.msg})"
        ) from None
    except RecursionError:
        raise ModelsJsonError("--models-json is not JSON (nested too deeply)") from None
    except ValueError as exc:  # an integer longer than any field may hold
        raise ModelsJsonError(f"--models-json is not JSON ({exc})") from None
    if not isinstance(raw, list) or not raw:
        raise ModelsJsonError("--models-json must be a non-empty list of models")
    if len(raw) > limits.MAX_MODELS:
        raise ModelsJsonError(f"--models-json has {len(raw)} models, at most {limits.MAX_MODELS}")
    entries = tuple(_entry(item, i) for i, item in enumerate(raw))
    names = [e.arch.name for e in entries]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ModelsJsonError(f"--models-json names {', '.join(repeated)} more than once")
    return entries


def request_groups(
    entries: Sequence[ModelEntry],
) -> list[tuple[int, int, tuple[ModelArch, ...]]]:
    """``(tensor parallel, context, models)`` groups: one measuring request each, in order of
    first appearance, so no model is measured at a context or degree it did not ask for."""
    groups: dict[tuple[int, int], list[ModelArch]] = {}
    for entry in entries:
        groups.setdefault((entry.tensor_parallel, entry.context_tokens), []).append(entry.arch)
    return [(tp, context, tuple(archs)) for (tp, context), archs in groups.items()]
