from __future__ import annotations

import pytest

from roofline_profiler.core.weight_formats import awq_int4, fp8_w8a8, gptq, int8_w8a8


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
