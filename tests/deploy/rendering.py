"""Shared access to the chart for the deployment tests: rendering, scenarios, versions.

Rendering goes through scripts/generate-manifests.py, the same code that writes manifests/, so
the tests and the committed manifests cannot disagree about how the chart is rendered.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART_DIR = ROOT / "charts" / "roofline-operator"
CI_VALUES = sorted((CHART_DIR / "ci").glob("*-values.yaml"))
RULES_FILE = ROOT / "observability" / "prometheus" / "rules" / "roofline.rules.yaml"
RULE_TESTS = sorted((ROOT / "observability" / "prometheus" / "tests").glob("*.yaml"))
DASHBOARD_FILE = ROOT / "observability" / "grafana" / "roofline-dashboard.json"
CRD_FILE = CHART_DIR / "crds" / "rooflineprofiles.roofline.dev.yaml"

RELEASE = "roofline-operator"
NAMESPACE = "roofline-system"


@functools.cache
def generator() -> ModuleType:
    """scripts/generate-manifests.py as a module (scripts/ is not a package)."""
    path = ROOT / "scripts" / "generate-manifests.py"
    spec = importlib.util.spec_from_file_location("generate_manifests", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def scenario_values(path: Path | None) -> dict[str, Any]:
    """Values of a ci/ scenario; ``None`` stands for the chart defaults."""
    if path is None:
        return {}
    loaded = yaml.safe_load(path.read_text())
    return dict(loaded or {})


def scenario_id(path: Path | None) -> str:
    return "defaults" if path is None else path.name.removesuffix("-values.yaml")


#: Every scenario the chart is rendered with: the defaults and each ci/*-values.yaml.
SCENARIOS: list[Path | None] = [None, *CI_VALUES]


@functools.cache
def _render_cached(values_json: str) -> dict[str, list[dict[str, Any]]]:
    rendered: dict[str, list[dict[str, Any]]] = generator().render_templates(
        json.loads(values_json), release=RELEASE, namespace=NAMESPACE
    )
    return rendered


def render(values: Mapping[str, Any] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Objects per template file, rendered with Helm's engine (cached per values)."""
    return _render_cached(json.dumps(values or {}, sort_keys=True))


def render_objects(values: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    return [obj for objects in render(values).values() for obj in objects]


def objects_of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj.get("kind") == kind]


def the_one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = objects_of_kind(objects, kind)
    assert len(found) == 1, f"expected one {kind}, rendered {len(found)}"
    return found[0]


def kube_versions() -> tuple[str, str]:
    """Oldest supported minor (Chart.yaml's kubeVersion) and newest that schemas exist for."""
    from kubernetes_validate import utils

    chart = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())
    match = re.search(r">=\s*(\d+\.\d+)", chart["kubeVersion"])
    assert match, f"kubeVersion {chart['kubeVersion']!r} has no lower bound"
    newest = re.sub(r"^(\d+\.\d+).*", r"\1", utils.latest_version())
    return match.group(1), newest


def walk(node: Any) -> Iterator[Any]:
    """Every dict and list nested in ``node``, depth first, ``node`` included."""
    yield node
    if isinstance(node, dict):
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)
