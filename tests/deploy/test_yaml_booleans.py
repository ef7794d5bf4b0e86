"""No shipped YAML holds a bare YAML 1.1 boolean where a string is meant.

kubectl, Helm and every Go YAML reader built on go-yaml v2 read YAML 1.1, where a bare ``n``,
``y``, ``yes``, ``no``, ``on`` or ``off`` is a boolean; PyYAML, which every other test here reads
YAML with, takes ``y`` and ``n`` for strings. So the generated CRD's bare ``n:`` key passed every
test and was refused by the API server (``undefined field 'n'``). This suite reads every shipped
YAML text as written (``yaml11.py``); ``tests/operator/realserver/test_real_crd.py`` applies the
files with the real kubectl.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from .rendering import CHART_DIR, ROOT, SCENARIOS, generator, scenario_id, scenario_values
from .yaml11 import booleans_in_excerpt, booleans_where_strings_belong

#: Every YAML file users apply, install or copy, and every file the chart is made of that is
#: YAML as written (its templates are checked as rendered, below).
SHIPPED = sorted(
    [
        ROOT / ".hadolint.yaml",
        *(
            path
            for folder in ("manifests", "charts", "observability")
            for path in (ROOT / folder).rglob("*")
            if path.suffix in (".yaml", ".yml") and "templates" not in path.relative_to(ROOT).parts
        ),
    ]
)
#: Markdown whose ``yaml`` blocks users copy.
DOCUMENTS = sorted([*(ROOT / "docs").glob("*.md"), ROOT / "README.md", CHART_DIR / "README.md"])
YAML_BLOCK = re.compile(r"^```yaml\n(.*?)^```", re.MULTILINE | re.DOTALL)
#: Chart values that render every optional template.
EVERYTHING = {
    **generator().MONITORING_VALUES,
    "exampleProfile": {"enabled": True},
}


def _id(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_every_shipped_kind_of_file_is_covered() -> None:
    covered = {_id(p).split("/")[0] for p in SHIPPED}
    assert covered >= {"manifests", "charts", "observability"}
    assert any(p.name == "01-crds.yaml" for p in SHIPPED)
    assert any(p.parent.name == "examples" for p in SHIPPED)


@pytest.mark.parametrize("path", SHIPPED, ids=_id)
def test_a_shipped_yaml_file_holds_no_bare_boolean_where_a_string_belongs(path: Path) -> None:
    findings = booleans_where_strings_belong(path.read_text())
    assert not findings, "\n".join(map(str, findings))


@pytest.mark.parametrize("path", DOCUMENTS, ids=_id)
def test_the_yaml_blocks_of_the_docs_hold_no_bare_boolean_where_a_string_belongs(
    path: Path,
) -> None:
    findings = []
    for i, block in enumerate(YAML_BLOCK.findall(path.read_text())):
        try:
            found = booleans_where_strings_belong(block)
        except yaml.YAMLError:  # an excerpt, elided by indentation: read line by line
            found = booleans_in_excerpt(block)
        findings += [f"block {i}: {finding}" for finding in found]
    assert not findings, "\n".join(findings)


@pytest.mark.parametrize(
    "values",
    [*(scenario_values(s) for s in SCENARIOS), EVERYTHING],
    ids=[*(scenario_id(s) for s in SCENARIOS), "every-template"],
)
def test_the_rendered_chart_holds_no_bare_boolean_where_a_string_belongs(
    values: dict[str, object],
) -> None:
    """What Helm hands the API server, as text: a template's output is YAML 1.1 to Helm too."""
    findings = [
        f"{name}: {finding}"
        for name, text in generator().render_texts(values).items()
        for finding in booleans_where_strings_belong(text)
    ]
    assert not findings, "\n".join(findings)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        pytest.param("shape:\n  k: 4096\n  n: 14336\n", ["n"], id="bare-n-key"),
        pytest.param("shape:\n  k: 4096\n  'n': 14336\n", [], id="quoted-n-key"),
        pytest.param('required: [k, "n"]\n', [], id="quoted-n-item"),
        pytest.param("required: [k, n]\n", ["n"], id="bare-n-item"),
        pytest.param("enabled: yes\n", ["yes"], id="yes-value"),
        pytest.param("enabled: true\n", [], id="canonical-boolean"),
        pytest.param("enabled: True\n", ["True"], id="capitalised-boolean"),
        pytest.param("labels:\n  gpu: true\n", ["true"], id="boolean-label"),
        pytest.param("labels:\n  gpu: 'true'\n", [], id="quoted-label"),
        pytest.param("Off: 1\n", ["Off"], id="off-key"),
        pytest.param("country: NO\n", ["NO"], id="norway"),
        pytest.param("a: 1\n---\nY: 2\n", ["Y"], id="second-document"),
    ],
)
def test_the_check_finds_what_yaml_1_1_reads_as_a_boolean(text: str, found: list[str]) -> None:
    assert [f.text for f in booleans_where_strings_belong(text)] == found


@pytest.mark.parametrize(
    ("text", "found"),
    [
        pytest.param("spec:\n    n: 1\n", ["n"], id="bare-key"),
        pytest.param("    - on: x\n", ["on"], id="item-key"),
        pytest.param("      enabled: yes  # comment\n", ["yes"], id="bare-value"),
        pytest.param("      enabled: true\n", [], id="canonical"),
        pytest.param("    query: 'n'\n", [], id="quoted"),
    ],
)
def test_an_excerpt_is_read_line_by_line(text: str, found: list[str]) -> None:
    assert [f.text for f in booleans_in_excerpt(text)] == found


def test_the_generated_manifests_quote_every_boolean_looking_string() -> None:
    """The generator's writer, fed every YAML 1.1 boolean spelling as keys and values."""
    words = ["y", "Y", "n", "N", "yes", "No", "ON", "off", "true", "False", "yEs"]
    obj = {"metadata": {"labels": dict.fromkeys(words, "x")}, "values": words}
    text = generator()._document_stream([obj])
    assert booleans_where_strings_belong(text) == []
    for word in words:
        assert f"'{word}'" in text, word
