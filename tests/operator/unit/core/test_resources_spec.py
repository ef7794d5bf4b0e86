"""``spec.resources`` checked as the API server checks the profiler pod it ends up in."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest

from roofline_operator.core.resources_spec import (
    MAX_QUANTITY_CHARS,
    parse_quantity,
    parse_resources,
)
from roofline_operator.core.spec import parse_spec
from roofline_operator.core.spec_fields import SpecError


@pytest.mark.parametrize(
    ("value", "base_units"),
    [
        pytest.param("4Gi", 4 * 2**30, id="gibibytes"),
        pytest.param("512Mi", 512 * 2**20, id="mebibytes"),
        pytest.param("2G", 2 * 10**9, id="gigabytes"),
        pytest.param("1.5Gi", 1.5 * 2**30, id="fraction"),
        pytest.param("100m", 0.1, id="milli"),
        pytest.param("1e3", 1000, id="exponent"),
        pytest.param(1073741824, 2**30, id="integer"),
        pytest.param("129e6", 129 * 10**6, id="kubernetes-doc-example"),
    ],
)
def test_quantities_read_as_kubernetes_reads_them(value: Any, base_units: float) -> None:
    assert parse_quantity(value, "x") == Decimal(str(base_units))


@pytest.mark.parametrize("value", ["4 Gi", "4GB", "Gi", "", "four", True, None, 1.5, "4Gi\n"])
def test_what_is_no_quantity_is_refused_naming_the_field(value: Any) -> None:
    with pytest.raises(SpecError, match=re.escape("spec.resources.limits.memory")):
        parse_resources({"limits": {"memory": value}})


@pytest.mark.parametrize(
    ("resources", "fragment"),
    [
        pytest.param(
            {"requests": {"memory": "8Gi"}, "limits": {"memory": "4Gi"}},
            "spec.resources.requests.memory (8Gi) must be at most spec.resources.limits.memory",
            id="memory-request-above-limit",
        ),
        pytest.param(
            {"requests": {"cpu": "4"}, "limits": {"cpu": "500m"}},
            "spec.resources.requests.cpu",
            id="cpu-request-above-limit",
        ),
        pytest.param({"limits": {"memory": "-1Gi"}}, "must not be negative", id="negative"),
        pytest.param({"limits": ["memory"]}, "map of quantities", id="not-a-map"),
        pytest.param("8Gi", "spec.resources must be an object", id="not-an-object"),
    ],
)
def test_resources_the_api_server_would_refuse_are_an_invalid_spec(
    resources: Any, fragment: str
) -> None:
    with pytest.raises(SpecError, match=re.escape(fragment)):
        parse_spec({"resources": resources})


def test_sound_resources_pass_unchanged() -> None:
    resources = {"requests": {"cpu": "2", "memory": 4 << 30}, "limits": {"memory": "4Gi"}}
    assert parse_spec({"resources": resources}).resources == resources
    assert parse_spec({}).resources == {}


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("1" * (MAX_QUANTITY_CHARS + 1), id="digits"),
        pytest.param("0." + "0" * 150_000 + "1", id="150000-digit-fraction"),
        pytest.param("1" * 150_000 + "Gi", id="150000-digit-memory"),
    ],
)
def test_a_quantity_longer_than_the_limit_is_refused_before_it_is_read(value: str) -> None:
    """A 150,000-digit quantity once cost 0.6 s of the event loop per pod; the length is
    checked first, and the message does not repeat the value."""
    with pytest.raises(SpecError) as raised:
        parse_resources({"requests": {"memory": value}})
    message = str(raised.value)
    assert message.startswith("spec.resources.requests.memory")
    assert f"at most {MAX_QUANTITY_CHARS} characters" in message
    assert len(message) < 200


def test_a_quantity_at_the_length_limit_is_read() -> None:
    assert parse_quantity("1" * MAX_QUANTITY_CHARS, "x") == Decimal("1" * MAX_QUANTITY_CHARS)
