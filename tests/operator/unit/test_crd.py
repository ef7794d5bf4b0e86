"""The CRD file is the source of truth: check it against itself, the contract and the operator."""

from __future__ import annotations

import copy
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from tests.operator.harness.structural import as_json_schema
from tests.profiler.synthetic import add_headline_row, add_plan_row

from roofline_operator.core import spec as spec_module
from roofline_operator.core.names import GROUP, KIND, PLURAL, VERSION, NodeState
from roofline_operator.core.selection_spec import DEFAULT_GPU_RESOURCE
from roofline_operator.core.spec import parse_duration, parse_spec
from roofline_operator.core.spec_fields import INTEGER_FIELD_BOUNDS
from roofline_operator.decide.model_status import summarized
from roofline_profiler.core import limits
from roofline_profiler.wire import fields, plan_fields

ROOT = Path(__file__).resolve().parents[3]
CRD_PATH = ROOT / "charts" / "roofline-operator" / "crds" / "rooflineprofiles.roofline.dev.yaml"
EXAMPLE_PATH = ROOT / "manifests" / "examples" / "rooflineprofile.yaml"


@pytest.fixture(scope="module")
def crd() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(CRD_PATH.read_text())
    return document


@pytest.fixture(scope="module")
def version(crd: dict[str, Any]) -> dict[str, Any]:
    (only,) = crd["spec"]["versions"]
    return dict(only)


@pytest.fixture(scope="module")
def example() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(EXAMPLE_PATH.read_text())
    return document


def validate(version: dict[str, Any], document: dict[str, Any]) -> None:
    schema = as_json_schema(version["schema"]["openAPIV3Schema"], closed=True)
    schema["properties"]["metadata"] = {"type": "object"}
    jsonschema.Draft7Validator(schema).validate(document)


def schema_at(root: dict[str, Any], json_path: str) -> dict[str, Any]:
    """Follow a printer column's JSONPath (with filters) through the schema."""
    node = root
    for part in re.sub(r"\[\?\(.*?\)\]", ".[]", json_path).strip(".").split("."):
        if part == "[]":
            node = node["items"]
            continue
        node = node["properties"][part]
    return node


def test_the_crd_is_a_valid_kubernetes_object() -> None:
    kubernetes_validate.validate(yaml.safe_load(CRD_PATH.read_text()), "1.31.0", strict=True)


def test_the_crd_matches_the_contract(crd: dict[str, Any], version: dict[str, Any]) -> None:
    assert crd["metadata"]["name"] == f"{PLURAL}.{GROUP}"
    assert crd["spec"]["group"] == GROUP
    assert crd["spec"]["scope"] == "Cluster"
    assert crd["spec"]["names"]["kind"] == KIND
    assert crd["spec"]["names"]["shortNames"] == ["rp"]
    assert version["name"] == VERSION
    assert version["subresources"] == {"status": {}}


def test_every_printer_column_points_into_the_schema(version: dict[str, Any]) -> None:
    root = version["schema"]["openAPIV3Schema"]
    kinds = {"integer": "integer", "number": "number", "string": "string", "date": "string"}
    for column in version["additionalPrinterColumns"]:
        if column["jsonPath"].startswith(".metadata"):
            continue
        target = schema_at(root, column["jsonPath"])
        assert target["type"] == kinds[column["type"]], column["name"]


def test_the_spec_schema_has_no_floats(version: dict[str, Any]) -> None:
    def types(node: Any) -> list[str]:
        if isinstance(node, dict):
            found = [node["type"]] if isinstance(node.get("type"), str) else []
            return found + [t for v in node.values() for t in types(v)]
        if isinstance(node, list):
            return [t for v in node for t in types(v)]
        return []

    assert "number" not in types(version["schema"]["openAPIV3Schema"]["properties"]["spec"])


def test_status_keeps_room_for_kopf(version: dict[str, Any]) -> None:
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert status["x-kubernetes-preserve-unknown-fields"] is True


def test_node_states_in_the_schema_are_the_operators(version: dict[str, Any]) -> None:
    nodes = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["nodes"]
    assert nodes["items"]["properties"]["state"]["enum"] == [s.value for s in NodeState]


def test_schema_defaults_agree_with_the_operators_defaults(version: dict[str, Any]) -> None:
    properties = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    expected = {
        "gpuResource": DEFAULT_GPU_RESOURCE,
        "dtype": spec_module.DEFAULT_DTYPE,
        "maxParallel": spec_module.DEFAULT_MAX_PARALLEL,
        "timeoutSeconds": spec_module.DEFAULT_TIMEOUT_SECONDS,
        "pendingTimeoutSeconds": spec_module.DEFAULT_PENDING_TIMEOUT_SECONDS,
        "maxAttempts": spec_module.DEFAULT_MAX_ATTEMPTS,
        "retryBackoffSeconds": spec_module.DEFAULT_RETRY_BACKOFF_SECONDS,
        "changeThresholdPercent": spec_module.DEFAULT_CHANGE_THRESHOLD_PERCENT,
        "outlierThresholdPercent": spec_module.DEFAULT_OUTLIER_THRESHOLD_PERCENT,
        "labelNodes": True,
        "quick": False,
    }
    assert {k: properties[k]["default"] for k in expected} == expected


def test_schema_limits_are_the_profilers_limits(version: dict[str, Any]) -> None:
    properties = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert properties["dtype"]["enum"] == list(limits.DTYPE_NAMES)
    for dimension in ("k", "n"):
        shape = properties["shape"]["properties"][dimension]
        assert (shape["minimum"], shape["maximum"]) == (limits.MIN_DIMENSION, limits.MAX_DIMENSION)
    batch = properties["batches"]["items"]
    assert (batch["minimum"], batch["maximum"]) == (limits.MIN_BATCH, limits.MAX_BATCH)
    efficiency = properties["minBatchEfficiencyPercent"]
    assert (efficiency["minimum"], efficiency["maximum"]) == (
        limits.MIN_EFFICIENCY_PERCENT,
        limits.MAX_EFFICIENCY_PERCENT,
    )


def test_schema_bounds_of_the_operators_own_fields_are_the_parsers(
    version: dict[str, Any],
) -> None:
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    properties = spec["properties"]
    bounds = dict(INTEGER_FIELD_BOUNDS)
    low, high = bounds.pop("gpusPerNode")  # its maximum is a CEL rule
    assert properties["gpusPerNode"]["minimum"] == low
    rules = [r["rule"] for r in spec["x-kubernetes-validations"]]
    assert f"!has(self.gpusPerNode) || self.gpusPerNode <= {high}" in rules
    assert {k: (properties[k]["minimum"], properties[k]["maximum"]) for k in bounds} == bounds


def test_the_schema_bound_of_retain_unavailable_is_the_parsers(version: dict[str, Any]) -> None:
    retain = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][
        "retainUnavailableFor"
    ]
    (rule,) = retain["x-kubernetes-validations"]
    hours = spec_module.MAX_RETAIN_UNAVAILABLE_SECONDS / 3600
    assert rule["rule"] == f"duration(self) <= duration('{hours:g}h')"


def test_the_example_validates_against_the_schema(
    version: dict[str, Any], example: dict[str, Any]
) -> None:
    validate(version, example)


def test_the_example_passes_the_operators_own_checks(example: dict[str, Any]) -> None:
    parsed = parse_spec(example["spec"])
    assert parsed.shape is None, "the profiler's default shape"
    assert parsed.selection.gpus_per_node == 1
    interval = parse_duration(example["spec"]["reprofileInterval"])
    assert interval > parsed.timeout_seconds  # the CEL rule's cross-field check


@pytest.fixture
def full_example(example: dict[str, Any]) -> dict[str, Any]:
    """The example with the optional fields the bad cases below spoil filled in."""
    full = copy.deepcopy(example)
    full["spec"].update(
        shape={"k": 8192, "n": 8192},
        resources={"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"memory": "16Gi"}},
        maxParallel=2,
        dtype="bfloat16",
        batches=[1, 2, 4],
        minBatchEfficiencyPercent=50,
        labelNodes=True,
    )
    return full


def test_the_full_example_validates_against_the_schema(
    version: dict[str, Any], full_example: dict[str, Any]
) -> None:
    validate(version, full_example)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        pytest.param(("maxParallel",), 0, id="zero-parallel"),
        pytest.param(("dtype",), "float64", id="unknown-dtype"),
        pytest.param(("batches",), [0, 1], id="zero-batch"),
        pytest.param(("minBatchEfficiencyPercent",), 150, id="efficiency-over-100"),
        pytest.param(("reprofileInterval",), "7d", id="day-duration"),
        pytest.param(("shape", "k"), 0, id="zero-k"),
        pytest.param(("namespace",), "Bad_Namespace", id="bad-namespace"),
        pytest.param(("labelNodes",), "yes", id="string-bool"),
        pytest.param(("maxParalel",), 3, id="misspelt-field"),
        pytest.param(("resources", "requests", "cpu"), "two", id="bad-quantity"),
    ],
)
def test_bad_examples_are_rejected(
    version: dict[str, Any], full_example: dict[str, Any], path: tuple[str, ...], value: Any
) -> None:
    bad = copy.deepcopy(full_example)
    target = bad["spec"]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(jsonschema.ValidationError):
        validate(version, bad)


@pytest.mark.parametrize("path", [CRD_PATH, EXAMPLE_PATH], ids=["crd", "example"])
def test_no_bare_n_key_that_yaml_1_1_readers_take_for_false(path: Path) -> None:
    """kubectl reads YAML 1.1, where a bare ``n`` is the boolean false, not the shape field."""
    bare = re.compile(r"(^\s*n\s*:)|([{,\[]\s*n\s*[:,\]])", re.MULTILINE)
    assert not bare.search(path.read_text())


def test_the_status_the_operator_writes_fits_the_status_schema(version: dict[str, Any]) -> None:
    from tests.operator.unit.operator_builders import device, profile
    from tests.profiler.format_builders import compact_format

    from roofline_operator.core.node_results import from_compact
    from roofline_operator.decide.records import NodeRecord
    from roofline_operator.decide.status import build_status

    records = {
        "multi": NodeRecord(
            name="multi",
            gpus=2,
            state=NodeState.PROFILED,
            attempts=1,
            cycle_hash="h",
            result=from_compact(
                replace(
                    profile(device(0), device(1)),
                    weight_formats=(
                        compact_format("awq-int4-g128", 1),
                        compact_format("int8-w8a8", 0, peak_interval=None, ridge_interval=None),
                    ),
                ),
                "h",
            ),
        ),
        "broken": NodeRecord(
            name="broken",
            gpus=1,
            state=NodeState.RETRYING,
            attempts=1,
            pod=None,
            reason="OOMKilled",
            message="oom",
            last_attempt_at=1.7e9,
            next_attempt_at=1.7e9 + 30,
        ),
    }
    status = build_status(
        records=records,
        spec_hash="h",
        conflicts={"multi": "elder"},
        spec_error=None,
        previous_conditions=[],
        generation=2,
        now=1.7e9,
    )
    schema = as_json_schema(
        version["schema"]["openAPIV3Schema"]["properties"]["status"], closed=True
    )
    jsonschema.Draft7Validator(
        schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER
    ).validate(status)


def unnamed_in_status_schema(version: dict[str, Any]) -> list[str]:
    """The status keys of the tables' published numbers (``fields.DEVICE_HEADLINE``,
    ``plan_fields.MODEL_PLAN``) that the status schema does not name: the API server would prune
    each of them from every status the operator writes."""
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    node = status["nodes"]["items"]["properties"]
    places = {
        "nodes[]": (node, [k for f in fields.DEVICE_HEADLINE for k in (f.key, f.interval_key)]),
        "nodes[].devices[]": (
            node["devices"]["items"]["properties"],
            [k for f in fields.DEVICE_HEADLINE for k in (f.key, f.interval_key)],
        ),
        "nodes[].measured": (
            node["measured"]["properties"],
            [f.key for f in fields.DEVICE_HEADLINE],
        ),
        "nodes[].previous": (
            node["previous"]["properties"],
            [f.key for f in fields.DEVICE_HEADLINE],
        ),
        "nodes[].models[]": (
            node["models"]["items"]["properties"],
            [f.key for f in plan_fields.MODEL_PLAN],
        ),
        "models[]": (status["models"]["items"]["properties"], list(summarized())),
    }
    return [
        f"{where}.{key}"
        for where, (properties, keys) in places.items()
        for key in keys
        if key not in properties
    ]


def test_the_status_schema_names_every_number_the_tables_publish(version: dict[str, Any]) -> None:
    assert unnamed_in_status_schema(version) == []


def test_a_new_published_number_fails_until_the_status_schema_names_it(
    version: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    device_row, plan_row = add_headline_row(monkeypatch), add_plan_row(monkeypatch)
    assert unnamed_in_status_schema(version) == [
        f"nodes[].{device_row.key}",
        f"nodes[].{device_row.interval_key}",
        f"nodes[].devices[].{device_row.key}",
        f"nodes[].devices[].{device_row.interval_key}",
        f"nodes[].measured.{device_row.key}",
        f"nodes[].previous.{device_row.key}",
        f"nodes[].models[].{plan_row.key}",
        f"models[].{plan_row.key}",
    ]


def test_the_status_schema_bounds_the_weight_formats_as_their_readers_do(
    version: dict[str, Any],
) -> None:
    from tests.profiler.format_builders import compact_format

    from roofline_operator.core.node_formats import WEIGHT_FORMATS_KEY, format_to_status
    from roofline_profiler.wire.compact_formats import MAX_FORMAT_NAME_CHARS

    node = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["nodes"]
    formats = node["items"]["properties"][WEIGHT_FORMATS_KEY]
    assert formats["maxItems"] == limits.MAX_WEIGHT_FORMATS
    assert formats["x-kubernetes-list-map-keys"] == ["weightFormat"]
    item = formats["items"]
    assert item["properties"]["weightFormat"]["maxLength"] == MAX_FORMAT_NAME_CHARS
    assert set(item["properties"]) == set(format_to_status(compact_format()))
    assert set(item["required"]) <= set(format_to_status(compact_format(peak_interval=None)))
