"""The contract of every string the export writes, and the one check over what it writes.

A string reaches the exported YAML as a key, a value, an object's name or inside a comment, and
some of them reach PromQL (KEDA's queries) or kubectl's command line. Each is matched whole
(``fullmatch``: ``match`` with ``$`` accepts a trailing newline) against the contract of the
place it goes: Kubernetes names as apimachinery validates them, label values, a device name of
printable ASCII, a served model name that needs no escape inside a PromQL string. Free text that
only reaches comments (a file's name) may hold any character but the ones a comment cannot
carry (``commented.needs_escape``).

:func:`check_written` is the last step before a byte is written: every object of the final
document list has a valid name, and no two objects of one kind (in one API group) and namespace
share a name, whichever target built them. Pure module.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from roofline_cli.export.commented import needs_escape, plain

#: An RFC 1123 label (a namespace, a Service): apimachinery ``IsDNS1123Label``.
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
#: An RFC 1123 subdomain (most objects' names, a node's): apimachinery ``IsDNS1123Subdomain``.
DNS_SUBDOMAIN = re.compile(
    r"(?=[-a-z0-9.]{1,253}\Z)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
)
#: A label value, empty included: apimachinery ``IsValidLabelValue``.
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?")
#: A qualified name (a label key, a resource name such as ``nvidia.com/gpu``): an optional DNS
#: subdomain prefix and ``/``, then at most 63 characters.
QUALIFIED_NAME = re.compile(
    r"((?=[^/]{1,253}/)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)
#: A model's served name (``--model-id``, vLLM's ``--served-model-name``), as written into a
#: PromQL string: printable ASCII without space, ``"`` or ``\`` (so no escape is needed, and no
#: reader of the query can end the string early), not starting with ``-``.
SERVED_MODEL = re.compile(r"[!#-,.-\[\]-~][!#-\[\]-~]{0,255}")
#: A Prometheus address: http or https, printable ASCII without space, quote or backslash.
PROMETHEUS_URL = re.compile(r"https?://[!#-\[\]-~]{1,2040}")
#: Longest free text (a file's name) taken into a comment.
MAX_FREE_TEXT = 255


class BadName(ValueError):
    """A string outside its contract, or two objects of one name; ``str()`` is one line."""


def _shown(text: str) -> str:
    """``text`` as one printable line, for an error message: ``repr`` escapes every control,
    separator and bidi character."""
    return repr(text[:80] + ("..." if len(text) > 80 else ""))


def checked(text: str, contract: re.Pattern[str], what: str) -> str:
    """``text`` when ``contract`` matches it whole; else :class:`BadName` naming ``what``."""
    if not contract.fullmatch(text):
        raise BadName(f"{what} {_shown(text)} is not {_DESCRIBED.get(contract, 'allowed')}")
    return text


def free_text(text: str, what: str) -> str:
    """``text`` when a comment can carry it: no control, separator or bidi character."""
    bad = next((char for char in text if needs_escape(char)), None)
    if bad is not None:
        raise BadName(f"{what} {_shown(text)} holds U+{ord(bad):04X}, which YAML cannot carry")
    if len(text) > MAX_FREE_TEXT:
        raise BadName(f"{what} is longer than {MAX_FREE_TEXT} characters")
    return text


_DESCRIBED = {
    DNS_LABEL: "an RFC 1123 label (lower case letters, digits and '-', at most 63)",
    DNS_SUBDOMAIN: "a Kubernetes object name (an RFC 1123 subdomain, at most 253)",
    LABEL_VALUE: "a label value (letters, digits, '-', '_', '.', at most 63)",
    QUALIFIED_NAME: "a qualified name such as nvidia.com/gpu",
    SERVED_MODEL: "a served model name (printable ASCII without space, '\"' or '\\', at most 256)",
    PROMETHEUS_URL: "an http:// or https:// address of printable ASCII",
}


def _origin(header: str) -> str:
    """What built a document, for a message: its header's first sentence."""
    line = header.split("\n", 1)[0]
    sentence = re.split(r"(?<=[.:;])\s", line, maxsplit=1)[0]
    return sentence[:100].rstrip(".:;")


def _identity(document: Mapping[str, Any]) -> tuple[str, str, str, str] | None:
    metadata = document.get("metadata")
    if not isinstance(metadata, Mapping) or "kind" not in document:
        return None
    group = str(document.get("apiVersion", "")).rpartition("/")[0]
    kind, name = str(document["kind"]), str(metadata.get("name", ""))
    namespace = metadata.get("namespace")
    where = f"{kind} {name}" if namespace is None else f"{kind} {namespace}/{name}"
    checked(name, DNS_SUBDOMAIN, f"the name of {kind}")
    if namespace is not None:
        checked(str(namespace), DNS_LABEL, f"the namespace of {where}")
    labels = metadata.get("labels") or {}
    if not isinstance(labels, Mapping):
        raise BadName(f"the labels of {where} are not a mapping")
    for key, value in labels.items():
        checked(str(key), QUALIFIED_NAME, f"a label key of {where}")
        checked(str(value), LABEL_VALUE, f"label {key} of {where}")
    return group, kind, str(namespace or ""), name


def check_written(documents: Sequence[tuple[str, Any]]) -> None:
    """Every object about to be written has a valid name (and namespace, and labels), and no two
    objects of one kind and API group share a name in one namespace (or the cluster): the one
    applied last would silently replace the other."""
    seen: dict[tuple[str, str, str, str], str] = {}
    for header, built in documents:
        document = plain(built)
        identity = _identity(document) if isinstance(document, Mapping) else None
        if identity is None:
            continue
        if identity in seen:
            _, kind, namespace, name = identity
            where = f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"
            raise BadName(
                f"{where} would be written twice, for {_origin(seen[identity])!r} and for "
                f"{_origin(header)!r}: object names are lower case with '-' for other "
                "characters, so these share one; export one at a time (--model) into another "
                "--namespace, or rename one"
            )
        seen[identity] = header
