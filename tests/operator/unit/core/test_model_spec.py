from __future__ import annotations

from decimal import Decimal

import pytest
from tests.operator.unit.operator_builders import spec

from roofline_operator.core.model_spec import ModelSpec
from roofline_operator.core.spec import SHAPE_FALSE_KEY_MESSAGE
from roofline_operator.core.spec_fields import SpecError


def test_models_get_the_crd_defaults() -> None:
    parsed = spec(models=[{"name": "llama", "preset": "llama-3.1-8b"}])
    assert parsed.models == (ModelSpec(name="llama", preset="llama-3.1-8b"),)
    assert parsed.models[0].context_tokens == 4096
    assert parsed.models[0].tensor_parallel == 1


def test_a_config_map_reference_defaults_its_key_to_config_json() -> None:
    parsed = spec(models=[{"name": "m", "configMapRef": {"name": "cfg"}}])
    assert parsed.models[0].config_map == ("cfg", "config.json")


def test_slo_and_cost_are_read_as_seconds_and_decimal() -> None:
    parsed = spec(slo={"interTokenLatency": "1s500ms"}, gpuHourCost="2.50")
    assert parsed.itl_slo_seconds == pytest.approx(1.5)
    assert parsed.gpu_hour_cost == Decimal("2.50")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        pytest.param(
            {"models": [{"name": "m", "preset": "p", "config": {}}]},
            r"spec.models\[0\]: a model needs exactly one",
            id="two-sources",
        ),
        pytest.param({"models": [{"name": "m"}]}, "exactly one", id="no-source"),
        pytest.param(
            {"models": [{"name": "a", "preset": "p"}, {"name": "a", "preset": "q"}]},
            r"spec.models\[1\].name 'a' is used twice",
            id="duplicate-names",
        ),
        pytest.param(
            {"models": [{"name": f"m{i}", "preset": "p"} for i in range(9)]},
            "at most 8",
            id="nine-models",
        ),
        pytest.param({"models": [{"name": "-bad", "preset": "p"}]}, "label value", id="name"),
        pytest.param(
            {"models": [{"name": "m", "preset": "p", "contextTokens": 0}]},
            r"spec.models\[0\].contextTokens",
            id="context",
        ),
        pytest.param(
            {"models": [{"name": "m", "preset": "p", "tensorParallel": 65}]},
            r"spec.models\[0\].tensorParallel",
            id="tensor-parallel",
        ),
        pytest.param(
            {"models": [{"name": "m", "configMapRef": {"name": "Bad_Name"}}]},
            r"spec.models\[0\].configMapRef.name",
            id="config-map-name",
        ),
        pytest.param({"slo": {"interTokenLatency": "61s"}}, "at most 60s", id="slo-too-long"),
        pytest.param({"slo": {"interTokenLatency": "50"}}, "such as 50ms", id="slo-no-unit"),
        pytest.param({"gpuHourCost": 2.5}, "spec.gpuHourCost", id="cost-as-float"),
        pytest.param({"weightShape": "4096*14336"}, "spec.weightShape", id="weight-shape-form"),
        pytest.param(
            {"weightShape": "1048576x1048576"}, "spec.weightShape", id="weight-shape-too-big"
        ),
        pytest.param(
            {"weightShape": "8x8", "shape": {"k": 8, "n": 8}}, "not both", id="both-shapes"
        ),
        pytest.param({"shape": {"k": 4096}}, 'needs both k and "n"', id="shape-without-n"),
    ],
)
def test_what_the_schema_would_reject_names_its_field(
    fields: dict[str, object], message: str
) -> None:
    with pytest.raises(SpecError, match=message):
        spec(**fields)


def test_a_bare_yaml_n_read_as_false_names_the_likely_cause() -> None:
    with pytest.raises(SpecError) as caught:
        spec(shape={"k": 4096, "false": 14336})
    assert str(caught.value) == SHAPE_FALSE_KEY_MESSAGE
    assert "weightShape" in str(caught.value)


def test_weight_shape_and_shape_measure_the_same_and_hash_the_same() -> None:
    old, new = spec(shape={"k": 4096, "n": 14336}), spec(weightShape="4096x14336")
    assert old.shape == new.shape == (4096, 14336)
    assert old.measurement_hash() == new.measurement_hash()


def test_a_profile_without_models_keeps_its_digest_and_models_change_it() -> None:
    plain = spec()
    assert spec(slo={"interTokenLatency": "50ms"}).measurement_hash() == plain.measurement_hash()
    with_model = spec(models=[{"name": "m", "preset": "qwen3-8b"}])
    longer = spec(models=[{"name": "m", "preset": "qwen3-8b", "contextTokens": 8192}])
    digests = {plain.measurement_hash(), with_model.measurement_hash(), longer.measurement_hash()}
    assert len(digests) == 3
    assert with_model.measurement_hash("cm") != with_model.measurement_hash()
