import pytest

from roofline_profiler.core import roofline


def test_ridge_point_is_peak_over_bandwidth() -> None:
    assert roofline.ridge_point(790e12, 4.3e12) == pytest.approx(183.72093, rel=1e-6)


def test_ridge_point_needs_positive_ceilings() -> None:
    with pytest.raises(ValueError, match="positive"):
        roofline.ridge_point(1.0, 0.0)


def test_decode_gemm_counts_two_flops_per_multiply_add() -> None:
    assert roofline.decode_gemm_flops(1, 4096, 14336) == 2 * 4096 * 14336


def test_decode_gemm_traffic_is_weight_plus_input_plus_output() -> None:
    assert roofline.decode_gemm_bytes(8, 4096, 14336, 2) == 2 * (
        4096 * 14336 + 8 * 4096 + 8 * 14336
    )


def test_decode_intensity_is_about_the_batch_in_two_byte_dtypes() -> None:
    intensity = roofline.arithmetic_intensity(16, 4096, 14336, 2)
    assert 15.9 < intensity < 16.0
    assert roofline.arithmetic_intensity(16, 4096, 14336, 4) == pytest.approx(intensity / 2)


@pytest.mark.parametrize(
    ("intensity", "expected"),
    [
        pytest.param(10.0, 10.0 * 4.3e12, id="bandwidth-bound"),
        pytest.param(1000.0, 790e12, id="compute-bound"),
    ],
)
def test_roofline_bound_is_the_lower_ceiling(intensity: float, expected: float) -> None:
    assert roofline.roofline_bound(intensity, 790e12, 4.3e12) == pytest.approx(expected)


@pytest.mark.parametrize("target", [0.5, 1.0, 50.0, 183.7, 1000.0])
def test_batch_for_intensity_is_the_smallest_batch_that_reaches_it(target: float) -> None:
    batch = roofline.batch_for_intensity(target, 4096, 14336, 2)
    assert batch is not None
    assert roofline.arithmetic_intensity(batch, 4096, 14336, 2) >= target
    if batch > 1:
        assert roofline.arithmetic_intensity(batch - 1, 4096, 14336, 2) < target


def test_batch_for_intensity_knows_when_a_shape_can_never_get_there() -> None:
    # A 64x64 weight in fp16 tops out at 2*64*64/(2*128) = 32 FLOP/byte.
    assert roofline.batch_for_intensity(40.0, 64, 64, 2) is None


def test_unknown_dtype_is_rejected() -> None:
    with pytest.raises(ValueError, match="int4"):
        roofline.dtype_bytes("int4")


def test_a_quantized_weight_counts_its_own_bytes_and_the_activations_theirs() -> None:
    # 4-bit weights with a 2-byte scale per 128: 0.515625 bytes a weight; bf16 activations.
    per_weight = 0.5 + 2 / 128 / 1
    assert roofline.decode_gemm_bytes(8, 4096, 14336, per_weight, 2) == (
        per_weight * 4096 * 14336 + 2 * (8 * 4096 + 8 * 14336)
    )


def test_without_activation_bytes_the_activations_take_the_weights_size() -> None:
    assert roofline.decode_gemm_bytes(8, 64, 32, 2) == roofline.decode_gemm_bytes(8, 64, 32, 2, 2)


def test_a_four_bit_weight_raises_the_intensity_at_small_batch_almost_fourfold() -> None:
    bf16 = roofline.arithmetic_intensity(1, 4096, 14336, 2)
    int4 = roofline.arithmetic_intensity(1, 4096, 14336, 0.5, 2)
    assert 3.99 < int4 / bf16 < 4.0


@pytest.mark.parametrize("target", [0.5, 4.0, 60.0, 400.0])
def test_batch_for_intensity_solves_with_separate_weight_and_activation_bytes(
    target: float,
) -> None:
    batch = roofline.batch_for_intensity(target, 4096, 14336, 0.53, 2)
    assert batch is not None
    assert roofline.arithmetic_intensity(batch, 4096, 14336, 0.53, 2) >= target
    if batch > 1:
        assert roofline.arithmetic_intensity(batch - 1, 4096, 14336, 0.53, 2) < target


def test_the_activations_bound_the_intensity_a_quantized_weight_can_reach() -> None:
    # As B grows the intensity tends to 2KN / (a(K+N)) = 32 FLOP/byte for 64x64 in bf16,
    # however small the weight.
    assert roofline.batch_for_intensity(33.0, 64, 64, 0.5, 2) is None
    assert roofline.batch_for_intensity(31.0, 64, 64, 0.5, 2) is not None
