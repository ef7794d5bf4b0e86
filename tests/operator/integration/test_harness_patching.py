"""Patch formats and selectors of the emulated API server follow the Kubernetes rules."""

from __future__ import annotations

from typing import Any

import pytest
from tests.operator.harness.patching import (
    PatchError,
    json_patch,
    merge_patch,
    strategic_merge_patch,
)
from tests.operator.harness.selectors import SelectorError, compile_selectors

POD: dict[str, Any] = {
    "metadata": {"labels": {"app": "x"}, "finalizers": ["a"]},
    "status": {
        "conditions": [
            {"type": "PodScheduled", "status": "False"},
            {"type": "Ready", "status": "False"},
        ]
    },
}


def test_merge_patch_replaces_lists_and_null_deletes_keys() -> None:
    patched = merge_patch(
        POD,
        {
            "metadata": {"labels": {"app": None, "b": "1"}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        },
    )
    assert patched["metadata"]["labels"] == {"b": "1"}
    assert patched["status"]["conditions"] == [{"type": "Ready", "status": "True"}]


def test_strategic_merge_merges_conditions_by_type_and_finalizers_as_a_set() -> None:
    patched = strategic_merge_patch(
        POD,
        {
            "$setElementOrder/conditions": [{"type": "Ready"}],
            "metadata": {"finalizers": ["a", "b"]},
            "status": {"conditions": [{"type": "PodScheduled", "status": "True"}]},
        },
    )
    assert patched["status"]["conditions"] == [
        {"type": "PodScheduled", "status": "True"},
        {"type": "Ready", "status": "False"},
    ]
    assert patched["metadata"]["finalizers"] == ["a", "b"]
    assert "$setElementOrder/conditions" not in patched


def test_strategic_merge_deletes_list_items_by_directive() -> None:
    patched = strategic_merge_patch(
        POD,
        {
            "status": {"conditions": [{"type": "Ready", "$patch": "delete"}]},
            "metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]},
        },
    )
    assert patched["status"]["conditions"] == [{"type": "PodScheduled", "status": "False"}]
    assert patched["metadata"]["finalizers"] == []


def test_json_patch_applies_operations_and_fails_a_test_with_422() -> None:
    patched = json_patch(
        POD,
        [
            {"op": "add", "path": "/metadata/finalizers/-", "value": "b"},
            {"op": "remove", "path": "/metadata/labels/app"},
        ],
    )
    assert patched["metadata"] == {"labels": {}, "finalizers": ["a", "b"]}
    with pytest.raises(PatchError) as failure:
        json_patch(POD, [{"op": "test", "path": "/metadata/labels/app", "value": "y"}])
    assert failure.value.status == 422


@pytest.mark.parametrize(
    ("labels", "fields", "matches"),
    [
        pytest.param("app=x", None, True, id="equality"),
        pytest.param("app!=x", None, False, id="inequality"),
        pytest.param("app in (x, y),!missing", None, True, id="set-and-absence"),
        pytest.param("app notin (x)", None, False, id="notin"),
        pytest.param("other notin (x)", None, True, id="notin-matches-absent-keys"),
        pytest.param(None, "spec.nodeName=n1", True, id="field-equality"),
        pytest.param(None, "spec.nodeName!=n1,status.phase=Running", False, id="field-inequality"),
    ],
)
def test_selectors_match_like_the_api_server(
    labels: str | None, fields: str | None, matches: bool
) -> None:
    obj = {
        "metadata": {"labels": {"app": "x"}},
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running"},
    }
    assert compile_selectors(labels, fields)(obj) is matches


def test_a_malformed_selector_is_a_bad_request() -> None:
    with pytest.raises(SelectorError):
        compile_selectors("app in x", None)
