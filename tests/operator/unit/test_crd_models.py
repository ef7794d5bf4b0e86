"""The CRD's model-plan fields: spec.models, slo, gpuHourCost, weightShape and the plan status.

Schema checks use the CRD as a strict JSON Schema (unknown fields rejected, as kubectl's strict
field validation does). The CEL rules that only test field presence (exactly one model source,
not both shape forms, the YAML 1.1 ``n``) are evaluated by a small translation of that CEL subset,
so a rule that stops rejecting what its message promises fails here; rules with functions
(``duration``, ``split``) are checked by an API server, not here.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from tests.model_configs import PLAIN_AND_AWQ_FP8_MODELS
from tests.operator.harness.structural import apply_defaults, prune_unknown

from roofline_profiler.core import limits
from roofline_profiler.wire import plan_fields

ROOT = Path(__file__).resolve().parents[3]
CRD_PATH = ROOT / "charts" / "roofline-operator" / "crds" / "rooflineprofiles.roofline.dev.yaml"
EXAMPLE_PATH = ROOT / "manifests" / "examples" / "rooflineprofile-models.yaml"
CONTRACTS = ROOT / "docs" / "contracts.md"

CRD: dict[str, Any] = yaml.safe_load(CRD_PATH.read_text())
(VERSION,) = CRD["spec"]["versions"]
ROOT_SCHEMA: dict[str, Any] = VERSION["schema"]["openAPIV3Schema"]
SPEC_SCHEMA: dict[str, Any] = ROOT_SCHEMA["properties"]["spec"]
STATUS_SCHEMA: dict[str, Any] = ROOT_SCHEMA["properties"]["status"]
MODEL_SCHEMA: dict[str, Any] = SPEC_SCHEMA["properties"]["models"]["items"]
EXAMPLE: dict[str, Any] = yaml.safe_load(EXAMPLE_PATH.read_text())


def strict(node: Any) -> Any:
    """OpenAPI v3 schema as JSON Schema that rejects undeclared fields, like kubectl --validate."""
    if isinstance(node, list):
        return [strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {k: strict(v) for k, v in node.items() if not k.startswith("x-kubernetes-")}
    if node.get("x-kubernetes-int-or-string"):
        converted.pop("type", None)
    preserve = node.get("x-kubernetes-preserve-unknown-fields")
    if "properties" in node and "additionalProperties" not in node and not preserve:
        converted["additionalProperties"] = False
    return converted


def schema_errors(spec: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft7Validator(strict(SPEC_SCHEMA))
    return [error.message for error in validator.iter_errors(spec)]


# A CEL subset: has(self.f), !, &&, ||, parenthesised `cond ? a : b`, + and == on integers.
_HAS = re.compile(r"has\(self\.(\w+)\)")
_TERNARY = re.compile(r"\((has\(self, '\w+'\))\s*\?\s*(\w+)\s*:\s*(\w+)\)")
# A nested has(self.a.b) is outside it: test_crd_agreement's translation evaluates those.
_UNSUPPORTED = re.compile(r"\b(?!has\b)[a-z_]\w*\(|self\.\w+\.|\bself\.(?!\w+\))|has\(self,\w+\.")


def cel_subset(rule: str) -> str | None:
    """The rule as a Python expression over ``self``, or None when it is outside the subset."""
    if _UNSUPPORTED.search(rule.replace("has(self.", "has(self,")):
        return None
    text = _HAS.sub(lambda m: f"has(self, '{m[1].removeprefix('__').removesuffix('__')}')", rule)
    text = _TERNARY.sub(r"(\2 if \1 else \3)", text)
    text = text.replace("&&", " and ").replace("||", " or ")
    text = re.sub(r"!(?!=)", " not ", text)
    return text


def rules_at(
    schema: dict[str, Any], value: Any, path: str = "spec"
) -> Iterator[tuple[str, dict[str, str], Any]]:
    """(path, rule, value) for every CEL rule whose object is present in ``value``."""
    for rule in schema.get("x-kubernetes-validations", []):
        yield path, rule, value
    if isinstance(value, dict):
        for name, child in schema.get("properties", {}).items():
            if name in value:
                yield from rules_at(child, value[name], f"{path}.{name}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            yield from rules_at(schema["items"], item, f"{path}[{index}]")


def cel_messages(spec: dict[str, Any]) -> list[str]:
    """Messages of the subset's rules that the spec breaks."""
    messages = []
    for _path, rule, value in rules_at(SPEC_SCHEMA, spec):
        expression = cel_subset(rule["rule"])
        if expression is None:
            continue
        scope = {"self": value, "has": lambda obj, name: name in obj}
        if not eval(expression, {"__builtins__": {}}, scope):  # the CRD's own rules
            messages.append(" ".join(rule["message"].split()))
    return messages


def a_spec(**fields: Any) -> dict[str, Any]:
    spec = copy.deepcopy(EXAMPLE["spec"])
    spec.update(fields)
    return spec


def test_the_cel_subset_is_translated_as_cel_means_it() -> None:
    assert cel_subset("!has(self.__false__)") == " not has(self, 'false')"
    assert cel_subset("duration(self) > duration('0s')") is None
    assert cel_subset("!has(self.shape) || self.shape.k * self.shape.n <= 5") is None
    assert cel_subset("!has(self.slo) || !has(self.slo.timeToFirstToken)") is None
    expression = cel_subset("(has(self.a) ? 1 : 0) + (has(self.b) ? 1 : 0) == 1")
    assert expression is not None
    assert eval(expression, {}, {"self": {"a": 1}, "has": lambda o, n: n in o})


def test_the_two_model_example_validates_and_passes_the_rules() -> None:
    assert [m["name"] for m in EXAMPLE["spec"]["models"]] == [
        "Llama-3.1-8B-Instruct",
        "Mixtral-8x7B-Instruct-v0.1",
    ]
    assert schema_errors(EXAMPLE["spec"]) == []
    assert cel_messages(EXAMPLE["spec"]) == []


def test_the_api_server_defaults_the_kv_cache_dtype_to_auto_and_keeps_a_weight_format() -> None:
    spec = a_spec(models=PLAIN_AND_AWQ_FP8_MODELS)
    pruned: list[str] = []
    stored = prune_unknown(apply_defaults(spec, SPEC_SCHEMA), SPEC_SCHEMA, "spec", pruned)
    assert pruned == []
    plain, awq = stored["models"]
    assert plain["kvCacheDtype"] == "auto"
    assert "weightFormat" not in plain
    assert (awq["weightFormat"], awq["kvCacheDtype"]) == ("awq-int4", "fp8")


def test_the_api_server_defaults_context_and_tensor_parallel_and_keeps_inline_configs() -> None:
    spec = a_spec(
        models=[
            {"name": "inline", "config": {"hidden_size": 4096, "rms_norm_eps": 1e-5}},
            {"name": "from-map", "configMapRef": {"name": "llama-config"}},
        ]
    )
    pruned: list[str] = []
    stored = prune_unknown(apply_defaults(spec, SPEC_SCHEMA), SPEC_SCHEMA, "spec", pruned)
    assert pruned == []
    inline, from_map = stored["models"]
    assert (inline["contextTokens"], inline["tensorParallel"]) == (4096, 1)
    assert inline["config"] == {"hidden_size": 4096, "rms_norm_eps": 1e-5}
    assert from_map["configMapRef"] == {"name": "llama-config", "key": "config.json"}


def test_models_are_a_list_map_keyed_by_name_so_duplicates_are_rejected() -> None:
    models = SPEC_SCHEMA["properties"]["models"]
    assert models["x-kubernetes-list-type"] == "map"
    assert models["x-kubernetes-list-map-keys"] == ["name"]
    assert "name" in MODEL_SCHEMA["required"]


@pytest.mark.parametrize(
    "model",
    [
        pytest.param({"name": "a", "preset": "llama-3.1-8b", "config": {}}, id="preset-and-config"),
        pytest.param(
            {"name": "a", "config": {"x": 1}, "configMapRef": {"name": "c"}}, id="config-and-map"
        ),
        pytest.param({"name": "a"}, id="no-source"),
    ],
)
def test_a_model_needs_exactly_one_source(model: dict[str, Any]) -> None:
    assert cel_messages(a_spec(models=[model])) == [
        "a model needs exactly one of preset, config or configMapRef"
    ]


@pytest.mark.parametrize(
    ("model", "why"),
    [
        pytest.param(
            {"name": "meta-llama/Llama-3.1-8B", "preset": "x"}, "does not match", id="slash-name"
        ),
        pytest.param({"name": "a" * 64, "preset": "x"}, "long", id="name-over-63"),
        pytest.param({"name": "-lead", "preset": "x"}, "does not match", id="name-leading-dash"),
        pytest.param({"preset": "x"}, "required", id="no-name"),
        pytest.param({"name": "a", "preset": "x", "contextTokens": 0}, "minimum", id="zero-ctx"),
        pytest.param(
            {"name": "a", "preset": "x", "contextTokens": limits.MAX_CONTEXT_TOKENS + 1},
            "maximum",
            id="context-over-limit",
        ),
        pytest.param(
            {"name": "a", "preset": "x", "tensorParallel": limits.MAX_TENSOR_PARALLEL + 1},
            "maximum",
            id="tensor-parallel-over-limit",
        ),
        pytest.param({"name": "a", "preset": "x", "tensorParalel": 2}, "Additional", id="typo"),
        pytest.param(
            {"name": "a", "configMapRef": {"key": "c.json"}}, "required", id="map-no-name"
        ),
        pytest.param(
            {"name": "a", "configMapRef": {"name": "Bad_Name"}}, "does not match", id="map-name"
        ),
        pytest.param({"name": "a", "config": "hidden_size: 4096"}, "object", id="config-string"),
        pytest.param(
            {"name": "a", "preset": "x", "weightFormat": "awq"}, "does not match", id="format-awq"
        ),
        pytest.param(
            {"name": "a", "preset": "x", "weightFormat": "AWQ-INT4"},
            "does not match",
            id="format-capitals",
        ),
        pytest.param(
            {"name": "a", "preset": "x", "kvCacheDtype": "fp16"}, "is not one of", id="kv-fp16"
        ),
        pytest.param(
            {"name": "a", "preset": "x", "kvCacheDtype": "FP8"}, "is not one of", id="kv-capitals"
        ),
    ],
)
def test_bad_models_are_rejected_by_the_schema(model: dict[str, Any], why: str) -> None:
    errors = schema_errors(a_spec(models=[model]))
    assert errors
    assert any(why in error for error in errors), errors


def test_at_most_eight_models() -> None:
    models = [{"name": f"m{i}", "preset": "llama-3.1-8b"} for i in range(9)]
    assert any("too long" in e for e in schema_errors(a_spec(models=models)))
    assert schema_errors(a_spec(models=models[:8])) == []


@pytest.mark.parametrize(
    ("field", "value", "accepted"),
    [
        pytest.param("gpuHourCost", "2.50", True, id="cost-decimal"),
        pytest.param("gpuHourCost", "3", True, id="cost-integer"),
        pytest.param("gpuHourCost", 2.5, False, id="cost-float"),
        pytest.param("gpuHourCost", "2,50", False, id="cost-comma"),
        pytest.param("gpuHourCost", "-1", False, id="cost-negative"),
        pytest.param("slo", {"interTokenLatency": "50ms"}, True, id="itl-50ms"),
        pytest.param("slo", {"interTokenLatency": "0.1s"}, True, id="itl-decimal-seconds"),
        pytest.param("slo", {"interTokenLatency": "50"}, False, id="itl-no-unit"),
        pytest.param("slo", {"interTokenLatency": "1d"}, False, id="itl-days"),
        pytest.param("slo", {"ttft": "1s"}, False, id="slo-unknown-field"),
        pytest.param("weightShape", "4096x14336", True, id="shape-string"),
        pytest.param("weightShape", "4096X14336", False, id="shape-capital-x"),
        pytest.param("weightShape", "0x14336", False, id="shape-zero"),
        pytest.param("weightShape", "4096x", False, id="shape-half"),
    ],
)
def test_slo_cost_and_weight_shape_formats(field: str, value: Any, accepted: bool) -> None:
    spec = a_spec(**{field: value})
    spec.pop("shape", None)
    assert (schema_errors(spec) == []) is accepted


def test_the_spec_stays_free_of_floats() -> None:
    text = yaml.safe_dump(SPEC_SCHEMA)
    assert "type: number" not in text


def test_a_bare_n_read_as_false_by_yaml_1_1_is_rejected_naming_the_cause() -> None:
    """kubectl turns `shape: {k: 4096, n: 14336}` into {"k": 4096, "false": 14336}."""
    spec = a_spec(shape={"k": 4096, "false": 14336})
    spec.pop("weightShape", None)
    assert schema_errors(spec) == [], "the key must reach the rule, not be pruned or refused"
    messages = cel_messages(spec)
    assert any("YAML 1.1" in m and "bare n" in m and "weightShape" in m for m in messages)
    assert any("needs both k and" in m for m in messages)


def test_the_old_shape_form_still_works_but_not_together_with_weight_shape() -> None:
    old = a_spec(shape={"k": 4096, "n": 14336})
    old.pop("weightShape", None)
    assert schema_errors(old) == []
    assert cel_messages(old) == []
    both = a_spec(shape={"k": 4096, "n": 14336}, weightShape="4096x14336")
    assert cel_messages(both) == ["set weightShape or shape, not both"]


def test_the_models_printer_column_counts_planned_models() -> None:
    (column,) = [c for c in VERSION["additionalPrinterColumns"] if c["name"] == "Models"]
    assert column["jsonPath"] == ".status.summary.models"
    assert STATUS_SCHEMA["properties"]["summary"]["properties"]["models"]["type"] == "integer"


RATE = {"requestsPerSecond": 7.25, "limitedBy": "ttft", "promptTokens": 1000, "outputTokens": 200}


def a_status() -> dict[str, Any]:
    plan = {
        "name": "Llama-3.1-8B-Instruct",
        "contextTokens": 8192,
        "tensorParallel": 1,
        "minBatch": 24,
        "maxBatchByMemory": 180,
        "maxBatchByLatency": 96,
        "maxBatch": 96,
        "kvCacheTokens": 1_474_560,
        "tokensPerSecondAtMinBatch": 2100.5,
        "tokensPerSecondAtMaxBatch": 5400.0,
        "stepSecondsAtMinBatch": 0.0114,
        "stepSecondsAtMaxBatch": 0.0178,
        "costPerMillionTokensAtMaxBatch": 0.1286,
        "maxRequestRate": RATE,
        "weightFormat": "awq-int4-g128",
        "kvCacheDtype": "fp8",
    }
    failed = {"name": "Mixtral-8x7B-Instruct-v0.1", "reason": "ConfigMapNotFound", "message": "x"}
    spread = {"min": 24, "median": 28.0, "max": 32}
    return {
        "summary": {"matched": 2, "profiled": 2, "failed": 0, "pending": 0, "models": 1},
        "nodes": [{"name": "gpu-a", "state": "Profiled", "models": [plan, failed]}],
        "models": [
            {"name": plan["name"], "nodes": 2, "failedNodes": 0, "contextTokens": 8192}
            | {"weightFormat": "awq-int4-g128", "kvCacheDtype": "fp8"}
            | {key: spread for key in plan if key.startswith(("minBatch", "maxBatch"))}
            | {"classes": [{"product": "NVIDIA H100", "nodes": 2, "maxRequestRate": RATE}]},
            {"name": failed["name"], "nodes": 0, "failedNodes": 2, "reason": "ConfigMapNotFound"},
        ],
        "conditions": [
            {
                "type": "ModelsReady",
                "status": "False",
                "reason": "ConfigMapNotFound",
                "message": "x",
            }
        ],
    }


def test_the_status_schema_accepts_model_plans_and_their_summary() -> None:
    schema = strict(STATUS_SCHEMA)
    jsonschema.Draft7Validator(schema).validate(a_status())
    pruned: list[str] = []
    prune_unknown(a_status(), STATUS_SCHEMA, "status", pruned)
    assert pruned == []


def test_every_plan_field_the_contract_documents_is_in_the_status_schema() -> None:
    section = CONTRACTS.read_text().split("## Model plans", 1)[1]
    table = section.split("`status.nodes[].models[]`", 1)[1].split("\n\n", 2)[1]
    documented = {
        name for row in table.splitlines()[2:] for name in re.findall(r"`(\w+)`", row.split("|")[1])
    }
    item = STATUS_SCHEMA["properties"]["nodes"]["items"]["properties"]["models"]["items"]
    assert documented
    assert documented == set(item["properties"])
    summary = STATUS_SCHEMA["properties"]["models"]["items"]["properties"]
    per_replica = {
        "name",
        "contextTokens",
        "tensorParallel",
        "weightFormat",
        "kvCacheDtype",
        "reason",
        "message",
    }
    per_node = {f.key for f in plan_fields.MODEL_PLAN if not f.summarized} | {
        "minBatchReason",
        "maxRequestRate",  # per class, the slowest node's (model_classes)
    }
    for name in documented - per_replica - per_node:
        assert set(summary[name]["properties"]) == {"min", "median", "max"}, name


def test_spec_fields_the_contract_documents_are_in_the_schema() -> None:
    section = CONTRACTS.read_text().split("## Model plans", 1)[1].split("### Status", 1)[0]
    for path in re.findall(r"^\| `(spec\.[\w.\[\]]+)`", section, re.MULTILINE):
        node = SPEC_SCHEMA
        for part in path.removeprefix("spec.").split("."):
            node = node["properties"][part.removesuffix("[]")]
            if part.endswith("[]"):
                node = node["items"]
        assert node, path
    for field in (
        "name",
        "preset",
        "config",
        "configMapRef",
        "contextTokens",
        "tensorParallel",
        "weightFormat",
        "kvCacheDtype",
    ):
        assert f"| `.{field}`" in section
        assert field in MODEL_SCHEMA["properties"]


def test_the_example_has_no_bare_n_key_that_yaml_1_1_readers_take_for_false() -> None:
    bare = re.compile(r"(^\s*n\s*:)|([{,\[]\s*n\s*[:,\]])", re.MULTILINE)
    assert not bare.search(EXAMPLE_PATH.read_text())
    assert "shape" not in EXAMPLE["spec"]
