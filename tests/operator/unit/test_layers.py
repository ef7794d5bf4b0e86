"""The pure layer of the operator stays pure: unit-testable without Kopf or a network client."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

PURE_MODULES = ["spec", "nodes", "pods", "outcomes", "records", "labels", "planner", "status"]
IO_PACKAGES = {"kopf", "aiohttp", "kubernetes_asyncio", "kubernetes", "prometheus_client"}


def module_tree(module: str) -> ast.Module:
    spec = importlib.util.find_spec(f"roofline_operator.{module}")
    assert spec is not None
    assert spec.origin is not None
    return ast.parse(Path(spec.origin).read_text())


def imported_packages(module: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(module_tree(module)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("module", PURE_MODULES)
def test_pure_modules_import_no_kubernetes_client_kopf_or_http(module: str) -> None:
    assert imported_packages(module) & IO_PACKAGES == set()


@pytest.mark.parametrize("module", PURE_MODULES)
def test_pure_modules_use_only_the_profilers_result_modules(module: str) -> None:
    profiler_modules = {
        node.module
        for node in ast.walk(module_tree(module))
        if isinstance(node, ast.ImportFrom)
        and node.module
        and node.module.startswith("roofline_profiler")
    }
    assert profiler_modules <= {"roofline_profiler.compact", "roofline_profiler.result"}
