"""Reading YAML as kubectl and Helm do: YAML 1.1, where a bare y, n, yes, no, on or off is a
boolean.

PyYAML implements YAML 1.1 but leaves y and n out of its booleans, so a test that parses a
manifest with ``yaml.safe_load`` sees the key ``n`` where kubectl (go-yaml v2, through
sigs.k8s.io/yaml) sees ``false``: the CRD's ``shape.n`` once reached the API server as a
property named ``false``, and every test passed. :func:`booleans_where_strings_belong` walks the
document's nodes as they are written (plain or quoted) and reports every plain scalar a YAML 1.1
reader takes for a boolean where the file means a string.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import yaml

#: Every plain scalar YAML 1.1 reads as a boolean (its spec lists y|Y|yes|Yes|YES|n|N|no|No|NO|
#: true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF; any case here, which no reader
#: takes for a string with confidence either).
YAML11_BOOLEAN = re.compile(r"(?:y|n|yes|no|true|false|on|off)", re.IGNORECASE)
#: The only spellings a real boolean may have in a shipped file: one meaning in YAML 1.1 and 1.2.
CANONICAL_BOOLEANS = ("true", "false")
#: Keys whose value maps strings to strings in every file we ship (Kubernetes labels,
#: annotations, selectors and ConfigMap data; Prometheus labels and annotations, promtool's
#: expected ones): a boolean there is a string meant.
STRING_MAPS = frozenset(
    {
        "labels",
        "annotations",
        "matchLabels",
        "nodeSelector",
        "data",
        "stringData",
        "additionalLabels",
        "exp_labels",
        "exp_annotations",
    }
)


@dataclass(frozen=True)
class Finding:
    line: int
    text: str
    why: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.text!r} {self.why}"


def _plain_boolean(node: yaml.Node) -> bool:
    return (
        isinstance(node, yaml.ScalarNode)
        and node.style is None
        and YAML11_BOOLEAN.fullmatch(node.value) is not None
    )


def _walk(node: yaml.Node, strings_only: bool = False) -> Iterator[Finding]:
    """Findings under ``node``; ``strings_only``: ``node`` is a map whose values are strings."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if _plain_boolean(key):
                yield Finding(key.start_mark.line + 1, key.value, "as a key is a boolean")
            if strings_only and isinstance(value, yaml.ScalarNode):
                if _plain_boolean(value):
                    yield Finding(
                        value.start_mark.line + 1, value.value, "is a boolean, not a string"
                    )
                continue
            name = key.value if isinstance(key, yaml.ScalarNode) else None
            yield from _walk(value, name in STRING_MAPS)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            yield from _walk(item)
    elif _plain_boolean(node) and node.value not in CANONICAL_BOOLEANS:
        yield Finding(
            node.start_mark.line + 1,
            node.value,
            "is a YAML 1.1 boolean: write true or false for one, quote it for a string",
        )


#: A key or a value on one line of an excerpt, written bare.
_EXCERPT_KEY = re.compile(r"^\s*(?:-\s+)?(?P<word>[A-Za-z]+)\s*:(?:\s|$)")
_EXCERPT_VALUE = re.compile(r":\s+(?P<word>[A-Za-z]+)\s*(?:#.*)?$")


def booleans_in_excerpt(text: str) -> list[Finding]:
    """The same check, line by line, for an excerpt that is no whole YAML document (a docs block
    that elides with indentation): a bare key, or a bare value other than ``true``/``false``."""
    findings = []
    for number, line in enumerate(text.splitlines(), start=1):
        key = _EXCERPT_KEY.match(line)
        if key and YAML11_BOOLEAN.fullmatch(key["word"]):
            findings.append(Finding(number, key["word"], "as a key is a boolean"))
        value = _EXCERPT_VALUE.search(line)
        word = value["word"] if value else ""
        if YAML11_BOOLEAN.fullmatch(word) and word not in CANONICAL_BOOLEANS:
            findings.append(Finding(number, word, "is a YAML 1.1 boolean"))
    return findings


def booleans_where_strings_belong(text: str) -> list[Finding]:
    """Every plain scalar of ``text`` (all its documents) that a YAML 1.1 reader takes for a
    boolean where a string is meant: any such key, any such value inside a map of strings
    (:data:`STRING_MAPS`), and any value spelled other than ``true``/``false`` anywhere."""
    findings: list[Finding] = []
    for document in yaml.compose_all(text, Loader=yaml.SafeLoader):
        if document is not None:
            findings.extend(_walk(document))
    return findings
