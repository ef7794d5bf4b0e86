from __future__ import annotations

from decimal import Decimal

import pytest
from tests.model_configs import PLAIN_AND_AWQ_FP8_MODELS
from tests.operator.unit.operator_builders import spec

from roofline_operator.core.model_spec import ModelSpec
from roofline_operator.core.spec import SHAPE_FALSE_KEY_MESSAGE
from roofline_operator.core.spec_fields import SpecError


def test_models_get_the_crd_defaults() -> None:
    parsed = spec(models=[{"name": "llama", "preset": "llama-3.1-8b"}])
    assert parsed.models == (ModelSpec(name="llama", preset="llama-3.1-8b"),)
    assert parsed.models[0].context_tokens == 4096
    assert parsed.models[0].tensor_parallel == 1


def test_a_model_is_served_as_its_config_says_unless_the_spec_names_a_format_or_cache() -> None:
    plain, awq = spec(models=PLAIN_AND_AWQ_FP8_MODELS).models
    assert (plain.weight_format, plain.kv_cache_dtype) == (None, "auto")
    assert (awq.weight_format, awq.kv_cache_dtype) == ("awq-int4-g128", "fp8")


@pytest.mark.parametrize(
    ("written", "read"),
    [
        pytest.param("awq-int4", "awq-int4-g128", id="awq-default-group"),
        pytest.param("awq-int4-g64", "awq-int4-g64", id="awq-g64"),
        pytest.param("gptq-int4-asym", "gptq-int4-g128-asym", id="gptq-asym-default-group"),
        pytest.param("gptq-int8-g32-asym", "gptq-int8-g32-asym", id="gptq-8-bit-g32-asym"),
        pytest.param("int8-w8a8", "int8-w8a8", id="w8a8-int8"),
        pytest.param("fp8-w8a8", "fp8-w8a8", id="w8a8-fp8"),
    ],
)
def test_a_weight_format_is_read_as_the_one_name_a_result_keeps(written: str, read: str) -> None:
    (model,) = spec(models=[{"name": "m", "preset": "qwen3-8b", "weightFormat": written}]).models
    assert model.weight_format == read


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
        pytest.param(
            {"models": [{"name": "m", "preset": "p", "weightFormat": "awq"}]},
            r"spec.models\[0\].weightFormat must be a weight format such as awq-int4-g128, "
            r"gptq-int8-g64-asym, int8-w8a8 or fp8-w8a8, got 'awq'$",
            id="weight-format-family-prefix",
        ),
        pytest.param(
            {"models": [{"name": "m", "preset": "p", "weightFormat": "int8-w8a8-g128"}]},
            r"spec.models\[0\].weightFormat must be",
            id="weight-format-group-on-w8a8",
        ),
        pytest.param(
            {"models": [{"name": "m", "preset": "p", "weightFormat": "awq-int4-asym"}]},
            r"spec.models\[0\].weightFormat must be",
            id="weight-format-asym-awq",
        ),
        pytest.param(
            {"models": [{"name": "m", "preset": "p", "weightFormat": "x" * 10_000}]},
            r"got 'x{36}\.\.\.$",
            id="weight-format-huge-shown-short",
        ),
        pytest.param(
            {"models": [{"name": "m", "preset": "p", "weightFormat": ["awq-int4"]}]},
            r"spec.models\[0\].weightFormat must be",
            id="weight-format-list",
        ),
        pytest.param(
            {"models": [{"name": "m", "preset": "p", "kvCacheDtype": "fp16"}]},
            r"spec.models\[0\].kvCacheDtype must be one of auto, fp8, fp8_e4m3, fp8_e5m2, "
            r"got 'fp16'$",
            id="kv-cache-dtype-fp16",
        ),
        pytest.param(
            {"models": [{"name": "m", "preset": "p", "kvCacheDtype": 8}]},
            r"spec.models\[0\].kvCacheDtype must be one of",
            id="kv-cache-dtype-number",
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


def test_a_format_or_cache_changes_the_digest_and_their_defaults_keep_it() -> None:
    """A profile written before the fields existed keeps its digest, so its nodes keep their
    plans; one spelling or another of the same format is one digest."""

    def digest(**fields: object) -> str:
        return spec(models=[{"name": "m", "preset": "qwen3-8b", **fields}]).measurement_hash()

    before = digest()
    assert digest(kvCacheDtype="auto") == before
    assert digest(weightFormat="awq-int4") == digest(weightFormat="awq-int4-g128") != before
    assert len({before, digest(kvCacheDtype="fp8"), digest(kvCacheDtype="fp8_e5m2")}) == 3
