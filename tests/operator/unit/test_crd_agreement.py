"""The CRD and the Python parsers accept the same specs, and their bounds are one definition.

The same inputs go to the CRD (its schema as JSON Schema, and its CEL rules through a small
translation of the CEL they use) and to the operator's parsers (``parse_spec``, and the model
check that fails a model alone). A spec the API server admits but the operator refuses sits in
the cluster as a profile that never runs; one the operator would take but the server refuses
cannot be written at all. Either way they must agree, and the bounds come from
``roofline_profiler.core.limits``.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from tests.operator.harness.structural import as_json_schema

from roofline_operator.core.model_spec import (
    DEFAULT_KV_CACHE_DTYPE,
    MAX_WEIGHT_FORMAT_CHARS,
    WEIGHT_FORMAT_PATTERN,
    ModelSpecError,
)
from roofline_operator.core.resources_spec import MAX_QUANTITY_CHARS
from roofline_operator.core.spec import parse_spec
from roofline_operator.core.spec_fields import SpecError
from roofline_operator.core.workload_spec import (
    MAX_BATCHED_TOKENS,
    MAX_NUM_SEQS,
    MAX_TTFT_SLO_SECONDS,
    MAX_WORKLOAD_TOKENS,
)
from roofline_operator.decide.model_sources import resolve_models
from roofline_profiler.core import limits
from roofline_profiler.core.model_config import PRESETS
from roofline_profiler.core.weight_formats import (
    FAMILIES,
    GROUP_SIZES,
    KV_CACHE_DTYPES,
    parse_weight_format,
)

ROOT = Path(__file__).resolve().parents[3]
CRD_PATH = ROOT / "charts" / "roofline-operator" / "crds" / "rooflineprofiles.roofline.dev.yaml"
CRD: dict[str, Any] = yaml.safe_load(CRD_PATH.read_text())
(VERSION,) = CRD["spec"]["versions"]
SPEC_SCHEMA: dict[str, Any] = VERSION["schema"]["openAPIV3Schema"]["properties"]["spec"]
MODEL_SCHEMA: dict[str, Any] = SPEC_SCHEMA["properties"]["models"]["items"]

#: CEL functions a rule may use here; others (``duration``, ``string``) need an API server.
_CEL_UNSUPPORTED = re.compile(r"\b(duration|string|size|matches|exists|all)\(")
_HAS = re.compile(r"has\(self((?:\.\w+)+)\)")
#: A field path; a last part followed by ``(`` is a method call (``split``), not a field.
_FIELD = re.compile(r"self((?:\.\w+(?![\w(]))+)")


def _path(chain: str) -> list[str]:
    return [part.removeprefix("__").removesuffix("__") for part in chain.strip(".").split(".")]


def cel_as_python(rule: str) -> str | None:
    """A rule of the CEL the CRD uses (``has``, field paths, ``&&``/``||``/``!``, ternaries,
    integer arithmetic, ``int()``, ``split``) as a Python expression; None outside it."""
    if _CEL_UNSUPPORTED.search(rule):
        return None

    def has(match: re.Match[str]) -> str:
        *parents, last = _path(match[1])
        return f"has(self{''.join(f'[{p!r}]' for p in parents)}, {last!r})"

    text = _HAS.sub(has, rule)
    text = _FIELD.sub(lambda m: "self" + "".join(f"[{p!r}]" for p in _path(m[1])), text)
    text = re.sub(r"\((has\(self, '\w+'\))\s*\?\s*(\w+)\s*:\s*(\w+)\)", r"(\2 if \1 else \3)", text)
    text = text.replace("&&", " and ").replace("||", " or ")
    return re.sub(r"!(?!=)", " not ", text)


def _rules(schema: dict[str, Any], value: Any) -> list[str]:
    """Messages of the rules ``value`` breaks, walking the schema as the API server does."""
    broken = []
    for rule in schema.get("x-kubernetes-validations", []):
        expression = cel_as_python(rule["rule"])
        if expression is None:
            continue
        scope = {"self": value, "has": lambda obj, name: name in obj, "int": int}
        try:
            passed = eval(expression, {"__builtins__": {}}, scope)  # the CRD's own rules
        except (KeyError, ValueError, TypeError):
            passed = False
        if not passed:
            broken.append(" ".join(rule["message"].split()))
    if isinstance(value, dict):
        for name, child in schema.get("properties", {}).items():
            if name in value:
                broken.extend(_rules(child, value[name]))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            broken.extend(_rules(schema["items"], item))
    return broken


def crd_admits(spec: dict[str, Any]) -> bool:
    validator = jsonschema.Draft7Validator(as_json_schema(SPEC_SCHEMA, closed=True))
    return not list(validator.iter_errors(spec)) and not _rules(SPEC_SCHEMA, spec)


def python_accepts(spec: dict[str, Any]) -> bool:
    """Whether the operator profiles the spec with every model it names."""
    try:
        parsed = parse_spec(spec)
    except (SpecError, ModelSpecError):
        return False
    resolution = resolve_models(parsed.models, "roofline-system", {})
    return not resolution.failures


LLAMA = dict(PRESETS["llama-3.1-8b"])
QWEN_MOE = dict(PRESETS["qwen3-30b-a3b"])


def with_config(base: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"models": [{"name": "m", "config": {**base, **fields}}]}


def with_preset(**fields: Any) -> dict[str, Any]:
    return {"models": [{"name": "m", "preset": "llama-3.1-8b", **fields}]}


CASES = [
    pytest.param({"device": "gpu"}, True, id="device-gpu"),
    pytest.param({"device": "cpu"}, True, id="device-cpu"),
    pytest.param({"device": "tpu"}, False, id="device-tpu"),
    pytest.param({"device": "Cpu"}, False, id="device-case"),
    pytest.param({"weightShape": "4096x14336"}, True, id="weight-shape-llama-ffn"),
    pytest.param({"weightShape": "1048576x1024"}, True, id="weight-shape-at-2^30"),
    pytest.param({"weightShape": "1048576x1025"}, False, id="weight-shape-over-2^30"),
    pytest.param({"weightShape": "2000000x100"}, False, id="weight-shape-k-over-2^20"),
    pytest.param({"weightShape": "100x2000000"}, False, id="weight-shape-n-over-2^20"),
    pytest.param({"weightShape": "1048577x1"}, False, id="weight-shape-k-one-over"),
    pytest.param({"shape": {"k": 4096, "n": 14336}}, True, id="shape-llama-ffn"),
    pytest.param({"shape": {"k": 1048576, "n": 1025}}, False, id="shape-over-2^30"),
    pytest.param({"shape": {"k": 1048577, "n": 1}}, False, id="shape-k-over-2^20"),
    pytest.param({"models": [{"name": "m", "preset": "llama-3.1-8b"}]}, True, id="preset"),
    pytest.param(with_preset(contextTokens=limits.MAX_CONTEXT_TOKENS), True, id="context-at-limit"),
    pytest.param(
        with_preset(contextTokens=limits.MAX_CONTEXT_TOKENS + 1), False, id="context-over-limit"
    ),
    pytest.param(with_preset(tensorParallel=32), True, id="tensor-parallel-dividing-heads"),
    pytest.param(
        with_preset(tensorParallel=limits.MAX_TENSOR_PARALLEL + 1),
        False,
        id="tensor-parallel-over-limit",
    ),
    pytest.param(
        {"models": [{"name": f"m{i}", "preset": "llama-3.1-8b"} for i in range(limits.MAX_MODELS)]},
        True,
        id="models-at-limit",
    ),
    pytest.param(
        {
            "models": [
                {"name": f"m{i}", "preset": "llama-3.1-8b"} for i in range(limits.MAX_MODELS + 1)
            ]
        },
        False,
        id="models-over-limit",
    ),
    pytest.param({"slo": {"interTokenLatency": "50ms"}}, True, id="slo"),
    pytest.param({"slo": {"interTokenLatency": "1s500ms"}}, True, id="slo-compound"),
    pytest.param({"slo": {"interTokenLatency": "60s"}}, True, id="slo-at-limit"),
    # Over the limit is a CEL duration() rule, which needs an API server: see the SLO bound test.
    pytest.param({"slo": {"interTokenLatency": "50"}}, False, id="slo-without-unit"),
    pytest.param({"slo": {"interTokenLatency": "1h"}}, False, id="slo-in-hours"),
    pytest.param({"workload": {"promptTokens": 1000, "outputTokens": 200}}, True, id="workload"),
    pytest.param(
        {"workload": {"promptTokens": MAX_WORKLOAD_TOKENS, "outputTokens": 1}},
        True,
        id="workload-prompt-at-limit",
    ),
    pytest.param(
        {"workload": {"promptTokens": MAX_WORKLOAD_TOKENS + 1, "outputTokens": 1}},
        False,
        id="workload-prompt-over-limit",
    ),
    pytest.param(
        {"workload": {"promptTokens": 1, "outputTokens": 1, "maxNumBatchedTokens": 8192}},
        True,
        id="workload-token-budget",
    ),
    pytest.param(
        {"workload": {"promptTokens": 1, "outputTokens": 1, "maxNumSeqs": MAX_NUM_SEQS + 1}},
        False,
        id="workload-seqs-over-limit",
    ),
    pytest.param({"workload": {"promptTokens": 1000, "outputTokens": 0}}, False, id="output-zero"),
    pytest.param({"workload": {"promptTokens": 1000}}, False, id="workload-without-output"),
    pytest.param(
        {"workload": {"promptTokens": "1000", "outputTokens": 1}}, False, id="tokens-text"
    ),
    pytest.param(
        {
            "workload": {"promptTokens": 1000, "outputTokens": 200},
            "slo": {"timeToFirstToken": "2s"},
        },
        True,
        id="ttft-slo-with-workload",
    ),
    pytest.param({"slo": {"timeToFirstToken": "2s"}}, False, id="ttft-slo-without-workload"),
    pytest.param(
        {"workload": {"promptTokens": 1, "outputTokens": 1}, "slo": {"timeToFirstToken": "2"}},
        False,
        id="ttft-slo-without-unit",
    ),
    pytest.param({"reprofileInterval": "168h"}, True, id="interval-hours"),
    pytest.param({"reprofileInterval": "1h30m"}, True, id="interval-compound"),
    pytest.param({"reprofileInterval": "1d"}, False, id="interval-in-days"),
    pytest.param({"reprofileInterval": "1h 30m"}, False, id="interval-with-a-space"),
    pytest.param({"retainUnavailableFor": "720h"}, True, id="retain-at-limit"),
    pytest.param({"retainUnavailableFor": "90us"}, False, id="retain-in-microseconds"),
    pytest.param(
        {"resources": {"limits": {"memory": "1" * MAX_QUANTITY_CHARS}}},
        True,
        id="quantity-at-length-limit",
    ),
    pytest.param(
        {"resources": {"limits": {"memory": "1" * (MAX_QUANTITY_CHARS + 1)}}},
        False,
        id="quantity-over-length-limit",
    ),
    pytest.param(
        {"resources": {"requests": {"cpu": "0." + "0" * 150_000 + "1"}}},
        False,
        id="quantity-150000-digits",
    ),
    pytest.param(with_preset(weightFormat="awq-int4"), True, id="format-awq-default-group"),
    pytest.param(with_preset(weightFormat="gptq-int8-g64-asym"), True, id="format-gptq-asym"),
    pytest.param(with_preset(weightFormat="gptq-int4-asym"), True, id="format-gptq-asym-no-group"),
    pytest.param(with_preset(weightFormat="int8-w8a8"), True, id="format-w8a8"),
    pytest.param(with_preset(weightFormat="fp8-w8a8"), True, id="format-fp8"),
    pytest.param(with_preset(weightFormat="awq-int4-g100"), False, id="format-odd-group"),
    pytest.param(with_preset(weightFormat="awq-int4-asym"), False, id="format-asym-awq"),
    pytest.param(with_preset(weightFormat="int8-w8a8-g128"), False, id="format-group-on-w8a8"),
    pytest.param(with_preset(weightFormat="awq-int4-g0128"), False, id="format-leading-zero"),
    pytest.param(with_preset(weightFormat="nf4"), False, id="format-nf4"),
    pytest.param(with_preset(weightFormat=4), False, id="format-number"),
    pytest.param(with_preset(kvCacheDtype="fp8_e5m2"), True, id="kv-fp8-e5m2"),
    pytest.param(with_preset(kvCacheDtype="auto"), True, id="kv-auto"),
    pytest.param(with_preset(kvCacheDtype="int8"), False, id="kv-int8"),
    pytest.param(with_config(LLAMA), True, id="inline-llama"),
    pytest.param(with_config(QWEN_MOE, num_hidden_layers=1024), True, id="moe-1024-layers"),
    pytest.param(with_config(QWEN_MOE, num_hidden_layers=10**7), False, id="moe-10^7-layers"),
    pytest.param(with_config(LLAMA, hidden_size=1 << 18), False, id="hidden-size-over"),
    pytest.param(with_config(LLAMA, vocab_size=1 << 23), False, id="vocab-over"),
    pytest.param(with_config(QWEN_MOE, num_experts=5000), False, id="experts-over"),
    pytest.param(with_config(LLAMA, head_dim=None), True, id="null-head-dim"),
    pytest.param(
        with_config(LLAMA, **{f"extra_{i}": i for i in range(limits.MAX_CONFIG_FIELDS)}),
        False,
        id="too-many-config-fields",
    ),
]


@pytest.mark.parametrize(("fields", "accepted"), CASES)
def test_the_crd_and_the_parser_accept_the_same_specs(
    fields: dict[str, Any], accepted: bool
) -> None:
    spec = {"nodeSelector": {"gpu": "yes"}, **copy.deepcopy(fields)}
    assert crd_admits(spec) is accepted, "the CRD"
    assert python_accepts(spec) is accepted, "the operator"


def test_the_crd_bounds_of_a_model_config_are_the_profilers_limits() -> None:
    config = MODEL_SCHEMA["properties"]["config"]
    bounds = {k: v["maximum"] for k, v in config["properties"].items()}
    assert bounds == limits.MODEL_FIELD_LIMITS
    assert all(v["minimum"] == 1 for v in config["properties"].values())
    assert config["maxProperties"] == limits.MAX_CONFIG_FIELDS


def test_the_crd_bounds_of_a_model_entry_are_the_profilers_limits() -> None:
    properties = MODEL_SCHEMA["properties"]
    assert properties["contextTokens"]["maximum"] == limits.MAX_CONTEXT_TOKENS
    assert properties["contextTokens"]["default"] == limits.DEFAULT_CONTEXT_TOKENS
    assert properties["tensorParallel"]["maximum"] == limits.MAX_TENSOR_PARALLEL
    assert properties["tensorParallel"]["default"] == limits.DEFAULT_TENSOR_PARALLEL
    assert SPEC_SCHEMA["properties"]["models"]["maxItems"] == limits.MAX_MODELS


def every_weight_format_spelling() -> list[str]:
    """Each family with every group suffix (the engines', others, a leading zero, none) and with
    and without ``-asym``: the names the parser and the CRD must agree on."""
    groups = ["", *(f"-g{g}" for g in (*GROUP_SIZES, 0, 16, 100, 512, 1024, "0128"))]
    return [
        f"{family}{group}{asym}"
        for family in (*FAMILIES, "awq-int8", "gptq-int3", "nf4")
        for group in groups
        for asym in ("", "-asym")
    ]


def parser_reads(name: str) -> bool:
    try:
        parse_weight_format(name)
    except ValueError:
        return False
    return True


def test_the_crd_admits_exactly_the_weight_formats_the_parser_reads() -> None:
    """``parse_weight_format`` also reads a group size written with leading zeros (``-g0128``),
    which neither the CRD nor the operator admits: the spec takes each format's one spelling."""
    weight_format = MODEL_SCHEMA["properties"]["weightFormat"]
    assert weight_format["pattern"] == WEIGHT_FORMAT_PATTERN
    crd = re.compile(weight_format["pattern"])
    for name in every_weight_format_spelling():
        one_spelling = "-g0" not in name
        assert bool(crd.search(name)) is (parser_reads(name) and one_spelling), name
    assert parser_reads("awq-int4-g0128")
    assert not crd.search("awq-int4-g0128")
    longest = max((n for n in every_weight_format_spelling() if crd.search(n)), key=len)
    assert len(longest) == weight_format["maxLength"] == MAX_WEIGHT_FORMAT_CHARS


def test_every_name_a_result_keeps_for_a_format_is_one_the_crd_admits() -> None:
    crd = re.compile(MODEL_SCHEMA["properties"]["weightFormat"]["pattern"])
    names = {parse_weight_format(n).name for n in every_weight_format_spelling() if parser_reads(n)}
    assert len(names) == 4 + 2 * 4 * 2 + 2  # AWQ, GPTQ 4/8-bit (asym or not), the two W8A8
    assert all(crd.search(name) for name in names)


def test_the_crd_kv_cache_dtypes_are_the_profilers() -> None:
    kv_cache_dtype = MODEL_SCHEMA["properties"]["kvCacheDtype"]
    assert kv_cache_dtype["enum"] == list(KV_CACHE_DTYPES)
    assert kv_cache_dtype["default"] == DEFAULT_KV_CACHE_DTYPE == "auto"


def test_the_crd_bound_of_the_slo_is_the_profilers_limit() -> None:
    latency = SPEC_SCHEMA["properties"]["slo"]["properties"]["interTokenLatency"]
    (rule,) = latency["x-kubernetes-validations"]
    assert f"<= duration('{limits.MAX_ITL_SLO_SECONDS:g}s')" in rule["rule"]


def test_the_crd_bounds_of_the_workload_and_its_ttft_target_are_the_operators() -> None:
    workload = SPEC_SCHEMA["properties"]["workload"]["properties"]
    assert workload["promptTokens"]["maximum"] == MAX_WORKLOAD_TOKENS
    assert workload["outputTokens"]["maximum"] == MAX_WORKLOAD_TOKENS
    assert workload["maxNumBatchedTokens"]["maximum"] == MAX_BATCHED_TOKENS
    assert workload["maxNumSeqs"]["maximum"] == MAX_NUM_SEQS
    ttft = SPEC_SCHEMA["properties"]["slo"]["properties"]["timeToFirstToken"]
    (rule,) = ttft["x-kubernetes-validations"]
    assert f"<= duration('{MAX_TTFT_SLO_SECONDS:g}s')" in rule["rule"]


def test_the_crd_shape_rules_name_the_profilers_limits() -> None:
    rules = " ".join(r["rule"] for r in SPEC_SCHEMA["x-kubernetes-validations"])
    assert rules.count(str(limits.MAX_WEIGHT_ELEMENTS)) == 2  # shape and weightShape
    assert str(limits.MAX_DIMENSION) in rules
    shape = SPEC_SCHEMA["properties"]["shape"]["properties"]
    assert shape["k"]["maximum"] == shape["n"]["maximum"] == limits.MAX_DIMENSION


def test_the_cel_translation_reads_field_paths_and_skips_what_it_cannot_evaluate() -> None:
    assert cel_as_python("!has(self.shape.k)") == " not has(self['shape'], 'k')"
    assert cel_as_python("self.shape.k * self.shape.n <= 4") == (
        "self['shape']['k'] * self['shape']['n'] <= 4"
    )
    assert cel_as_python("duration(self.x) > duration('1m')") is None


def test_the_crd_bounds_quantity_strings_at_the_parsers_length() -> None:
    resources = SPEC_SCHEMA["properties"]["resources"]["properties"]
    for section in ("requests", "limits"):
        assert resources[section]["additionalProperties"]["maxLength"] == MAX_QUANTITY_CHARS


@pytest.mark.parametrize("resource", ["cpu", "memory"])
def test_the_crd_refuses_a_request_above_its_limit_for_cpu_and_memory(resource: str) -> None:
    """docs/operator.md says the CRD refuses both, as the operator does (``InvalidSpec``); the
    rules use ``quantity()``, which needs an API server (tests/operator/realserver runs them)."""
    rules = SPEC_SCHEMA["properties"]["resources"]["x-kubernetes-validations"]
    compared = [
        r
        for r in rules
        if f"quantity(string(self.requests['{resource}']))" in r["rule"]
        and f"quantity(string(self.limits['{resource}']))" in r["rule"]
    ]
    assert len(compared) == 1
    assert f"spec.resources.requests.{resource} must be at most" in compared[0]["message"]
