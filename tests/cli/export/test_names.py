"""The contract of every string the export writes, and the one check over the documents."""

from __future__ import annotations

import re
from typing import Any

import pytest

from roofline_cli.export.commented import Note
from roofline_cli.export.names import (
    DNS_LABEL,
    DNS_SUBDOMAIN,
    LABEL_VALUE,
    PROMETHEUS_URL,
    QUALIFIED_NAME,
    SERVED_MODEL,
    BadName,
    check_written,
    checked,
    free_text,
)

ACCEPTED = [
    (DNS_LABEL, "default"), (DNS_LABEL, "a" * 63), (DNS_SUBDOMAIN, "gpu-a.zone-1"),
    (DNS_SUBDOMAIN, "a" * 253), (LABEL_VALUE, ""), (LABEL_VALUE, "Llama-3.1_8B"),
    (QUALIFIED_NAME, "nvidia.com/gpu"), (QUALIFIED_NAME, "app"),
    (QUALIFIED_NAME, "app.kubernetes.io/managed-by"),
    (SERVED_MODEL, "meta-llama/Llama-3.1-8B-Instruct"), (SERVED_MODEL, "llama:8b@v1"),
    (PROMETHEUS_URL, "http://prometheus-operated.monitoring.svc:9090"),
    (PROMETHEUS_URL, "https://p.example/prometheus?x=1"),
]  # fmt: skip
REFUSED = [
    (DNS_LABEL, "Default"), (DNS_LABEL, "a" * 64), (DNS_LABEL, "default\n"), (DNS_LABEL, "-x"),
    (DNS_LABEL, "a.b"), (DNS_SUBDOMAIN, "a" * 254), (DNS_SUBDOMAIN, "-x"),
    (DNS_SUBDOMAIN, "gpu-a\n"), (DNS_SUBDOMAIN, "a..b"), (LABEL_VALUE, "x" * 64),
    (LABEL_VALUE, "a b"), (LABEL_VALUE, "a\n"), (QUALIFIED_NAME, "a b"),
    (QUALIFIED_NAME, "nvidia.com/gpu\n"), (QUALIFIED_NAME, "/gpu"), (QUALIFIED_NAME, "A.com/x"),
    (SERVED_MODEL, 'x"} or vector(1)'), (SERVED_MODEL, "a\\b"), (SERVED_MODEL, "a b"),
    (SERVED_MODEL, "-x"), (SERVED_MODEL, "a\u2028"), (SERVED_MODEL, "x" * 257),
    (PROMETHEUS_URL, "file:///etc/passwd"), (PROMETHEUS_URL, "http://p\n"),
    (PROMETHEUS_URL, 'http://p"'), (PROMETHEUS_URL, "http://"),
]  # fmt: skip


@pytest.mark.parametrize(("contract", "text"), ACCEPTED)
def test_a_string_within_its_contract_passes_as_it_is(contract: re.Pattern[str], text: str) -> None:
    assert checked(text, contract, "x") == text


@pytest.mark.parametrize(("contract", "text"), REFUSED)
def test_a_string_outside_its_contract_is_one_printable_line(
    contract: re.Pattern[str], text: str
) -> None:
    with pytest.raises(BadName) as caught:
        checked(text, contract, "--flag")
    assert str(caught.value).startswith("--flag ")
    assert str(caught.value).isprintable()


@pytest.mark.parametrize(
    "text", ["a\u2028b", "a\x85b", "a\rb", "a\nb", "a\x1bb", "a\u202eb", "a\ufeffb", "x" * 256]
)
def test_free_text_refuses_what_a_comment_cannot_carry(text: str) -> None:
    with pytest.raises(BadName):
        free_text(text, "the file's name")
    assert free_text("résultat (1).json", "name") == "résultat (1).json"


def _object(kind: str, name: str, namespace: str | None = "ns", api: str = "v1") -> Any:
    metadata = {"name": name} if namespace is None else {"name": name, "namespace": namespace}
    return {"apiVersion": api, "kind": kind, "metadata": metadata}


def test_names_inside_notes_are_checked_too() -> None:
    with pytest.raises(BadName, match="written twice"):
        check_written(
            [("a", _object("ConfigMap", "x")), ("b", Note(_object("ConfigMap", "x"), "c"))]
        )
    with pytest.raises(BadName, match="name of ConfigMap"):
        check_written([("a", {**_object("ConfigMap", "x"), "metadata": Note({"name": "X"}, "c")})])


def test_objects_of_one_name_may_differ_in_kind_group_or_namespace() -> None:
    check_written(
        [
            ("a", _object("ConfigMap", "x")),
            ("b", _object("ConfigMap", "x", namespace="other")),
            ("c", _object("ScaledObject", "x", api="keda.sh/v1alpha1")),
            ("d", _object("ConfigMap", "x", api="example.com/v1")),
            ("patch", [{"op": "add", "path": "/x", "value": 1}]),
        ]
    )


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param(_object("ConfigMap", "x"), _object("ConfigMap", "x"), id="namespaced"),
        pytest.param(
            _object("ClusterQueue", "q", None, "kueue.x-k8s.io/v1beta2"),
            _object("ClusterQueue", "q", None, "kueue.x-k8s.io/v1beta1"),
            id="two-versions-of-one-group",
        ),
    ],
)
def test_two_objects_of_one_kind_namespace_and_name_are_refused_naming_both(
    first: Any, second: Any
) -> None:
    with pytest.raises(BadName, match="written twice") as caught:
        check_written(
            [("For model llama-3.1-8b. More.", first), ("For model Llama-3.1-8B.", second)]
        )
    assert "'For model llama-3.1-8b'" in str(caught.value)
    assert "'For model Llama-3.1-8B'" in str(caught.value)


@pytest.mark.parametrize(
    "document",
    [
        pytest.param(_object("ConfigMap", "x" * 254), id="long-name"),
        pytest.param(_object("ConfigMap", "Upper"), id="upper-case-name"),
        pytest.param(_object("ConfigMap", "x", namespace="a.b"), id="namespace"),
        pytest.param(
            {**_object("ConfigMap", "x"), "metadata": {"name": "x", "labels": {"a": "x" * 64}}},
            id="label-value",
        ),
        pytest.param(
            {**_object("ConfigMap", "x"), "metadata": {"name": "x", "labels": {"a b": "x"}}},
            id="label-key",
        ),
    ],
)
def test_an_object_whose_name_or_labels_break_their_contract_is_refused(document: Any) -> None:
    with pytest.raises(BadName):
        check_written([("h", document)])
