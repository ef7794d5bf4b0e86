"""The GPU product label as a cross-check of the measured product: GFD's forms agree, anything
else is a mismatch naming both values, and no label is no mismatch."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.operator.unit.operator_builders import device, profile

from roofline_operator.core.node_results import from_compact
from roofline_operator.decide.product_label import (
    PRODUCT_LABEL,
    LabelMismatch,
    gfd_form,
    label_agrees,
    label_mismatch,
    product_label,
)


@pytest.mark.parametrize(
    ("label", "measured"),
    [
        pytest.param("NVIDIA-H200", "NVIDIA H200", id="gfd-form"),
        pytest.param("NVIDIA-H100-80GB-HBM3", "NVIDIA H100 80GB HBM3", id="gfd-form-long"),
        pytest.param("NVIDIA-A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB", id="dashes-kept"),
        pytest.param("Tesla-T4-SHARED", "Tesla T4", id="time-sliced"),
        pytest.param(
            "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "NVIDIA A100-SXM4-40GB MIG 1g.5gb", id="mig-single"
        ),
        pytest.param("NVIDIA-A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB MIG 1g.5gb", id="mig-mixed"),
    ],
)
def test_gfds_forms_of_the_measured_product_agree(label: str, measured: str) -> None:
    assert label_agrees(label, measured)


@pytest.mark.parametrize(
    ("label", "measured"),
    [
        pytest.param("NVIDIA-H100-80GB-HBM3", "NVIDIA H200", id="another-product"),
        pytest.param("NVIDIA-H200-NVL", "NVIDIA H200", id="a-longer-product"),
        pytest.param("nvidia-h200", "NVIDIA H200", id="another-case"),
        pytest.param("NVIDIA-H200-SHARED-SHARED", "NVIDIA H200", id="suffix-twice"),
        pytest.param("NVIDIA-A100", "NVIDIA A100-SXM4-40GB MIG 1g.5gb", id="a-prefix-not-a-gpu"),
        pytest.param(
            "NVIDIA-A100-SXM4-80GB", "NVIDIA A100-SXM4-40GB MIG 1g.5gb", id="mig-of-another-gpu"
        ),
    ],
)
def test_another_product_disagrees(label: str, measured: str) -> None:
    assert not label_agrees(label, measured)


def test_gfd_form_replaces_each_run_of_spaces_with_a_dash() -> None:
    assert gfd_form("NVIDIA  H100 80GB") == "NVIDIA-H100-80GB"


@pytest.mark.parametrize(
    "labels",
    [
        pytest.param({}, id="not-labelled-yet"),
        pytest.param({PRODUCT_LABEL: ""}, id="empty"),
        pytest.param({PRODUCT_LABEL: "x" * 64}, id="longer-than-a-label"),
        pytest.param({PRODUCT_LABEL: "NVIDIA H200\n"}, id="no-label-value"),
    ],
)
def test_no_usable_label_is_no_mismatch_and_is_never_echoed(labels: dict[str, str]) -> None:
    result = from_compact(profile(device(name="NVIDIA H100 80GB HBM3")), "h")
    assert product_label(labels) is None
    assert label_mismatch(labels, result) is None


def test_a_label_naming_any_gpu_of_the_node_agrees() -> None:
    mixed = from_compact(
        profile(device(0, name="NVIDIA H200"), device(1, name="NVIDIA H100 80GB HBM3")), "h"
    )
    assert label_mismatch({PRODUCT_LABEL: "NVIDIA-H100-80GB-HBM3"}, mixed) is None


def test_a_mismatch_names_the_label_and_the_worst_gpus_product() -> None:
    result = from_compact(profile(device(name="NVIDIA H200")), "h")
    found = label_mismatch({PRODUCT_LABEL: "NVIDIA-B200"}, result)
    assert found == LabelMismatch("NVIDIA-B200", "NVIDIA H200")


@given(label=st.text(max_size=80), measured=st.text(min_size=1, max_size=64))
def test_any_label_gives_no_mismatch_or_one_naming_a_label_value(label: str, measured: str) -> None:
    """Node labels are untrusted: whatever one holds, the cross-check ends as no mismatch or as
    one whose label is a label value (never control characters into a message)."""
    result = from_compact(profile(device(name="NVIDIA H200")), "h")
    found = label_mismatch({PRODUCT_LABEL: label}, result)
    if found is not None:
        assert found.label == label
        assert product_label({PRODUCT_LABEL: label}) == label
        assert label.isascii()
        assert label.isprintable()
        assert len(label) <= 63
    assert label_agrees(gfd_form(measured), measured)
