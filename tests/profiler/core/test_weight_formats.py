from __future__ import annotations

import pytest

from roofline_profiler.core.weight_formats import (
    UnplannedFormat,
    awq_int4,
    fp8_w8a8,
    gptq,
    int8_w8a8,
    kv_cache_element_bytes,
    parse_weight_format,
    weight_format_of,
)


def test_an_awq_weight_reads_half_a_byte_plus_its_groups_scale_and_zero_point() -> None:
    # 4 bits, and per group of 128 weights a 16-bit scale and a 4-bit zero point.
    assert awq_int4(128).bytes_per_weight(4096) == pytest.approx((4 + 20 / 128) / 8)


def test_a_symmetric_gptq_weight_stores_no_zero_points() -> None:
    assert gptq(4, 128).bytes_per_weight(4096) == pytest.approx((4 + 16 / 128) / 8)
    assert gptq(8, 64, symmetric=False).bytes_per_weight(4096) == pytest.approx((8 + 24 / 64) / 8)


def test_w8a8_formats_keep_one_float_scale_per_output_channel() -> None:
    for fmt in (int8_w8a8(), fp8_w8a8()):
        assert fmt.matrix_bytes(4096, 1024) == 4096 * 1024 + 4 * 1024
        assert not fmt.weight_only


def test_a_matrix_counts_its_last_partial_group_whole() -> None:
    # 200 input channels in groups of 128: two groups of scales and zero points per channel.
    assert awq_int4(128).matrix_bytes(200, 64) == 200 * 64 // 2 + 2 * 64 * 20 // 8


def test_gptq_stores_four_or_eight_bit_weights_only() -> None:
    with pytest.raises(ValueError, match="4- or 8-bit"):
        gptq(3)


@pytest.mark.parametrize(
    "name", ["awq-int4-g128", "gptq-int4-g32", "gptq-int8-g64-asym", "int8-w8a8", "fp8-w8a8"]
)
def test_a_formats_name_reads_back_as_the_same_format(name: str) -> None:
    assert parse_weight_format(name).name == name


def test_a_grouped_family_without_a_group_takes_128() -> None:
    assert parse_weight_format("awq-int4") == awq_int4(128)
    assert parse_weight_format("gptq-int8").name == "gptq-int8-g128"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("int4", "not a weight format"),
        ("awq-int4-g100", "group size 100"),
        ("int8-w8a8-g128", "no group size"),
        ("awq-int4-g128-asym", "only GPTQ"),
        ("x" * 100, "not a weight format"),
    ],
)
def test_a_name_no_format_has_is_refused(name: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_weight_format(name)


@pytest.mark.parametrize(
    ("quantization", "expected"),
    [
        ({"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": True}, "awq-int4-g64"),
        (
            {"quant_method": "gptq", "bits": 8, "group_size": 128, "sym": False},
            "gptq-int8-g128-asym",
        ),
        ({"quant_method": "GPTQ", "bits": 4}, "gptq-int4-g128"),
        ({"quant_method": "fp8", "activation_scheme": "dynamic"}, "fp8-w8a8"),
    ],
)
def test_a_quantization_config_reads_as_the_format_vllm_serves(
    quantization: dict[str, object], expected: str
) -> None:
    assert weight_format_of(quantization).name == expected


@pytest.mark.parametrize(
    "quantization",
    [
        {"quant_method": "awq", "bits": 3},
        {"quant_method": "awq", "zero_point": False},
        {"quant_method": "gptq", "bits": True},
        {"quant_method": "gptq", "bits": 4, "sym": "yes"},
        {"quant_method": "gptq", "bits": 4, "group_size": -1},
        {"quant_method": "compressed-tensors", "config_groups": {}},
        {"quant_method": "bitsandbytes"},
        {"quant_method": None},
        ["awq"],
    ],
)
def test_a_quantization_the_plan_cannot_read_is_unplanned(quantization: object) -> None:
    with pytest.raises(UnplannedFormat):
        weight_format_of(quantization)


def test_an_fp8_cache_stores_one_byte_and_auto_the_models_own() -> None:
    assert kv_cache_element_bytes("auto", 2) == 2
    assert kv_cache_element_bytes("fp8_e4m3", 2) == 1
    with pytest.raises(ValueError, match="not a KV-cache dtype"):
        kv_cache_element_bytes("int4", 2)
