"""A profile's models checked before any pod starts: presets, inline configs, ConfigMaps.

Every model is read with the profiler's own pure reader (``model_from_config``), its tensor
parallel degree checked and its ``weightFormat`` and ``kvCacheDtype`` applied as the pod applies
them (``models.served_in``), so a bad config, or a format other than the one it declares, fails
that model at once, with a message naming the field, and never a profiler pod, a node or the
profile's other models. Only the valid models reach the
pods, each with its config inline, in one ConfigMap per profile and model set that the pods mount
(``--models-file``): not in argv, which caps an argument at 128 KiB (a large config made every
pod fail to start), and the pods never read the API themselves.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from roofline_operator.core.model_spec import DEFAULT_KV_CACHE_DTYPE, ModelSpec
from roofline_operator.core.names import (
    API_VERSION,
    KIND,
    LABEL_MANAGED_BY,
    LABEL_PROFILE,
    MANAGED_BY,
)
from roofline_operator.decide.labels import label_safe
from roofline_profiler.core.model_config import PRESETS, ModelArch, ModelError, parse_config_text
from roofline_profiler.core.models import ServingFields, UnknownPreset, checked_model, served_in

#: The dtype whose activations no engine serves quantized weights with.
FLOAT32 = "float32"
#: ``status.models[].reason`` of a model that cannot be planned.
UNKNOWN_PRESET = "UnknownPreset"
INVALID_MODEL = "InvalidModel"
CONFIG_MAP_NOT_FOUND = "ConfigMapNotFound"
CONFIG_MAP_KEY_NOT_FOUND = "ConfigMapKeyNotFound"
#: The API refused to read the ConfigMap (403) or failed (5xx, a dropped connection).
CONFIG_MAP_UNREADABLE = "ConfigMapUnreadable"
#: Checking the models took longer than the operator allows on one round.
MODEL_CHECK_TIMEOUT = "ModelCheckTimeout"
#: The ConfigMap that carries the models to the pods exists and is not the profile's (another
#: owner, or other content): the models cannot be delivered, the pods run without them.
MODELS_CONFIG_MAP_CONFLICT = "ModelsConfigMapConflict"


@dataclass(frozen=True)
class ModelFailure:
    reason: str
    message: str


@dataclass(frozen=True)
class UnreadableConfigMap:
    """A ConfigMap read that failed: the models that need it fail, the others go on."""

    status: int
    message: str


#: ConfigMap contents as read: ``(namespace, name)`` to its ``data``, ``None`` when it is
#: missing, :class:`UnreadableConfigMap` when the read failed.
ConfigMaps = Mapping[tuple[str, str], Mapping[str, str] | UnreadableConfigMap | None]


@dataclass(frozen=True)
class ServedFormat:
    """How the engine serves a valid model, as its config and its spec entry resolve it."""

    #: The decoder weights' format (``WeightFormat.name``); empty: the model's dtype.
    weight_format: str = ""
    #: vLLM's ``--kv-cache-dtype`` (``auto``: the model's dtype).
    kv_cache_dtype: str = DEFAULT_KV_CACHE_DTYPE

    @classmethod
    def of(cls, arch: ModelArch) -> ServedFormat:
        return cls(arch.weight_format, arch.kv_cache_dtype)


@dataclass(frozen=True)
class ResolvedModel:
    """A valid model, ready for the pod: a preset name or the config's fields, and how it is
    served."""

    spec: ModelSpec
    preset: str | None
    config: Mapping[str, Any] | None
    served: ServedFormat = field(default_factory=ServedFormat)

    def to_argument(self) -> dict[str, Any]:
        """The model's ``--models-file`` entry. ``weightFormat`` and ``kvCacheDtype`` only where
        the spec sets them (a format the config declares, the pod reads there itself), so the
        file, and the ConfigMap named after its digest, of a spec without them are as before."""
        entry: dict[str, Any] = {"name": self.spec.name}
        if self.preset is not None:
            entry["preset"] = self.preset
        else:
            entry["config"] = dict(self.config or {})
        entry["contextTokens"] = self.spec.context_tokens
        entry["tensorParallel"] = self.spec.tensor_parallel
        if self.spec.weight_format is not None:
            entry["weightFormat"] = self.spec.weight_format
        if self.spec.kv_cache_dtype != DEFAULT_KV_CACHE_DTYPE:
            entry["kvCacheDtype"] = self.spec.kv_cache_dtype
        return entry


@dataclass(frozen=True)
class ModelResolution:
    valid: tuple[ResolvedModel, ...] = ()
    #: Model name to why it cannot be planned, in spec order.
    failures: Mapping[str, ModelFailure] | None = None

    def models_json(self) -> str | None:
        """The pods' models file (``--models-file``); ``None`` without a valid model."""
        if not self.valid:
            return None
        entries = [m.to_argument() for m in self.valid]
        return json.dumps(entries, separators=(",", ":"), sort_keys=True)

    def formats(self) -> dict[str, ServedFormat]:
        """How each valid model is served, by name."""
        return {m.spec.name: m.served for m in self.valid}

    def digest(self) -> str:
        """What the pods receive, hashed: a changed ConfigMap re-profiles, like a changed spec."""
        text = self.models_json() or ""
        return hashlib.sha256(text.encode()).hexdigest()[:10] if text else ""

    def undelivered(self, message: str) -> ModelResolution:
        """Every valid model failed: the ConfigMap that carries them cannot be written."""
        failures = dict(self.failures or {})
        for model in self.valid:
            failures[model.spec.name] = ModelFailure(MODELS_CONFIG_MAP_CONFLICT, message)
        return ModelResolution((), failures)


#: The key (the file, once mounted) of the models' ConfigMap.
MODELS_FILE_KEY = "models.json"


def models_config_map_name(profile: str, profile_uid: str, digest: str) -> str:
    """``roofline-models-<profile>-<uid>-<digest>``: one immutable ConfigMap per profile and
    model set, so a pod reads exactly the models its spec digest names. The profile's UID makes
    it the profile's alone: names that slug alike (``fleet-a``, ``fleet.a``) no longer share one,
    and a profile deleted and created again under its name gets new ones."""
    slug = "".join(c if c.isalnum() else "-" for c in profile.lower()).strip("-")[:40] or "x"
    return f"roofline-models-{slug.strip('-')}-{profile_uid}-{digest}"


def build_models_config_map(
    profile: str, profile_uid: str, namespace: str, resolution: ModelResolution
) -> dict[str, Any] | None:
    """The ConfigMap that carries the profile's valid models to its pods; ``None`` without
    any. Owned by the profile, so the garbage collector removes it with the profile too."""
    text = resolution.models_json()
    if text is None:
        return None
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": models_config_map_name(profile, profile_uid, resolution.digest()),
            "namespace": namespace,
            "labels": {LABEL_MANAGED_BY: MANAGED_BY, LABEL_PROFILE: label_safe(profile)},
            "ownerReferences": [
                {"apiVersion": API_VERSION, "kind": KIND, "name": profile, "uid": profile_uid}
            ],
        },
        "immutable": True,
        "data": {MODELS_FILE_KEY: text},
    }


def foreign_config_map(existing: Mapping[str, Any], wanted: Mapping[str, Any]) -> str | None:
    """Why a ConfigMap found under the name of ``wanted`` is not the profile's own (``None``
    when it is: its owner reference names the profile's UID, it is immutable, and it holds
    exactly the models).

    Anyone who may create ConfigMaps in the profiler namespace may have created it first, or
    after deleting the operator's own, to choose the models every pod plans, or to fail every
    pod that mounts it. The profile's UID is readable by tenants and its models follow from the
    spec, so owner and content alone are not enough: a mutable one could be edited once
    checked. Such a ConfigMap is never mounted, and never deleted."""
    metadata = existing.get("metadata") or {}
    uid = wanted["metadata"]["ownerReferences"][0]["uid"]
    owners = metadata.get("ownerReferences") or []
    if not any(isinstance(o, Mapping) and o.get("uid") == uid for o in owners):
        return "no owner reference names the profile's UID"
    if existing.get("immutable") is not True:
        return "it is mutable"
    if existing.get("data") != wanted["data"] or existing.get("binaryData"):
        return "it holds other models"
    return None


def config_maps_needed(models: tuple[ModelSpec, ...], namespace: str) -> list[tuple[str, str]]:
    """The ``(namespace, name)`` of every ConfigMap the models refer to, each once."""
    refs = [(namespace, m.config_map[0]) for m in models if m.config_map is not None]
    return list(dict.fromkeys(refs))


def _config_from_map(
    model: ModelSpec, index: int, namespace: str, config_maps: ConfigMaps
) -> Mapping[str, Any] | ModelFailure:
    """The config a model's ConfigMap holds under its key.

    Anyone who may write ConfigMaps in the profiler namespace may have written it, and the
    status it is reported in is readable by tenants: a failure names the ConfigMap, the key and
    the config field at fault, never the ConfigMap's other keys nor any of its values.
    """
    assert model.config_map is not None
    name, key = model.config_map
    where = f"spec.models[{index}].configMapRef"
    data = config_maps.get((namespace, name))
    if isinstance(data, UnreadableConfigMap):
        return ModelFailure(
            CONFIG_MAP_UNREADABLE,
            f"{where}.name: reading ConfigMap {namespace}/{name} failed (HTTP {data.status}: "
            f"{data.message[:200]})",
        )
    if data is None:
        return ModelFailure(
            CONFIG_MAP_NOT_FOUND, f"{where}.name: ConfigMap {namespace}/{name} not found"
        )
    if key not in data:
        missing = f"{where}.key: ConfigMap {namespace}/{name} has no key {key!r}"
        return ModelFailure(CONFIG_MAP_KEY_NOT_FOUND, missing)
    try:
        config = parse_config_text(data[key], f"{where}: {namespace}/{name} key {key!r}")
    except ModelError as exc:
        return ModelFailure(INVALID_MODEL, exc.without_values())
    return config


def _checked(
    model: ModelSpec, index: int, config: Mapping[str, Any] | None, dtype: str | None
) -> ModelArch | ModelFailure:
    """The model as served, or why it cannot be planned; a config from a ConfigMap is reported
    without its values (:func:`_config_from_map`)."""
    where = model.where(index)
    try:
        arch = checked_model(model.name, model.preset, config, model.tensor_parallel, source=where)
    except UnknownPreset as exc:
        known = ", ".join(sorted(PRESETS))
        return ModelFailure(
            UNKNOWN_PRESET, f"{where}: unknown preset {exc.preset!r} (presets: {known})"
        )
    except ModelError as exc:
        message = exc.without_values() if model.config_map is not None else str(exc)
        if not message.startswith(where):
            message = f"{where}: {message}"
        return ModelFailure(INVALID_MODEL, message)
    entry = f"spec.models[{index}]"
    fields = ServingFields(where, f"{entry}.weightFormat", f"{entry}.kvCacheDtype")
    try:
        arch = served_in(arch, model.weight_format, model.kv_cache_dtype, fields)
    except ModelError as exc:  # its messages show no config value but the format's name
        return ModelFailure(INVALID_MODEL, str(exc))
    if arch.weight_format and dtype == FLOAT32:
        return ModelFailure(
            INVALID_MODEL,
            f"{where}: {arch.weight_format} weights under spec.dtype {FLOAT32}: the engines serve "
            "quantized weights with 16-bit activations (spec.dtype bfloat16 or float16)",
        )
    return arch


def _resolve(
    model: ModelSpec, index: int, namespace: str, config_maps: ConfigMaps, dtype: str | None
) -> ResolvedModel | ModelFailure:
    config = model.config
    if model.preset is None and config is None:
        found = _config_from_map(model, index, namespace, config_maps)
        if isinstance(found, ModelFailure):
            return found
        config = found
    checked = _checked(model, index, config, dtype)
    if isinstance(checked, ModelFailure):
        return checked
    served = ServedFormat.of(checked)
    if model.preset is not None:
        return ResolvedModel(model, model.preset, None, served)
    return ResolvedModel(model, None, dict(config or {}), served)


#: How :func:`resolve_models` words a model whose check raised something other than a
#: :class:`ModelError` (no input is known to: the fuzz tests look for this wording).
UNREADABLE_CONFIG = "the config cannot be checked"


def unreadable(model: ModelSpec, index: int, exc: Exception) -> str:
    return f"{model.where(index)}: {UNREADABLE_CONFIG} ({type(exc).__name__})"


def timed_out(models: tuple[ModelSpec, ...], seconds: float) -> ModelResolution:
    """Every model failed: checking them took longer than ``seconds``."""
    message = f"checking the models took longer than {seconds:g} s; retried next round"
    failures = {m.name: ModelFailure(MODEL_CHECK_TIMEOUT, message) for m in models}
    return ModelResolution((), failures)


def resolve_models(
    models: tuple[ModelSpec, ...],
    namespace: str,
    config_maps: ConfigMaps,
    dtype: str | None = None,
) -> ModelResolution:
    """Check every model; the valid ones go to the pods, the others fail alone. ``dtype``: the
    spec's, under which a quantized model is refused at ``float32``, as the profiler's
    ``--dtype float32`` refuses one (``None``: not checked)."""
    valid: list[ResolvedModel] = []
    failures: dict[str, ModelFailure] = {}
    for index, model in enumerate(models):
        try:
            outcome: ResolvedModel | ModelFailure = _resolve(
                model, index, namespace, config_maps, dtype
            )
        except Exception as exc:
            # A bulkhead: whatever a model's config does to the reader fails that model alone
            # (the round, the roofline and the other models go on); the fuzz test of model
            # configs proves no known input reaches it.
            outcome = ModelFailure(INVALID_MODEL, unreadable(model, index, exc))
        if isinstance(outcome, ModelFailure):
            failures[model.name] = outcome
        else:
            valid.append(outcome)
    return ModelResolution(tuple(valid), failures)
