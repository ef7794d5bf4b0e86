"""The CPU flags the real-engine and packed-linear tests choose their paths by."""

from __future__ import annotations

from tests.host_cpu import cpu_flags, serving_dtype


def test_the_flags_line_of_cpuinfo_is_read_as_a_set() -> None:
    cpuinfo = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 fma\nbugs\t\t: none\n"
    assert cpu_flags(cpuinfo) == {"fpu", "avx2", "fma"}


def test_a_cpuinfo_without_flags_has_none() -> None:
    assert cpu_flags("processor\t: 0\nFeatures\t: fp asimd\n") is None


def test_a_cpu_with_avx512_serves_in_bf16() -> None:
    assert serving_dtype(frozenset({"avx2", "avx512f", "avx512_bf16"})) == "bfloat16"


def test_a_cpu_with_avx2_but_no_avx512_serves_in_float32() -> None:
    assert serving_dtype(frozenset({"avx", "avx2", "fma"})) == "float32"


def test_a_cpu_without_x86_flags_serves_in_bf16() -> None:
    assert serving_dtype(None) == "bfloat16"
    assert serving_dtype(frozenset({"fpu", "sse2"})) == "bfloat16"
