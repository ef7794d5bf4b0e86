"""The tests' layout: every source module has a test file where the tree mirrors it, test modules
share builders through modules of their own (never through another test module), and the import
path is pytest's (``tests`` is a package on it), never edited by a test."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
#: Each source package and the folder of its tests.
MIRRORS = {
    ROOT / "profiler" / "roofline_profiler": TESTS / "profiler",
    ROOT / "operator" / "roofline_operator": TESTS / "operator" / "unit",
    ROOT / "cli" / "roofline_cli": TESTS / "cli",
}
#: Modules without a test file of their own, and why none is needed.
WITHOUT_TEST_FILE = {
    "profiler/roofline_profiler/__init__.py": "a docstring and __version__, which "
    "tests/cli/test_roofline_cli.py checks through `roofline --version`",
    "operator/roofline_operator/__init__.py": "a docstring and __version__ (as the profiler's)",
    "operator/roofline_operator/__main__.py": "`python -m roofline_operator`: one call of "
    "roofline_operator.run.cli.main, which tests/operator/unit/run/test_cli.py tests",
    "cli/roofline_cli/__main__.py": "`python -m roofline_cli`: one call of roofline_cli.main, "
    "which tests/cli/test_roofline_cli.py runs that way",
}


def source_modules() -> Iterator[Path]:
    for package in MIRRORS:
        yield from sorted(package.rglob("*.py"))


def layer_packages() -> list[Path]:
    """The ``__init__`` of each package's layers (its sub-packages)."""
    return [init for package in MIRRORS for init in sorted(package.glob("*/__init__.py"))]


def holds_only_a_docstring(tree: ast.Module) -> bool:
    return len(tree.body) == 1 and ast.get_docstring(tree) is not None


def mirrored_test_file(module: Path) -> Path:
    """``test_<module>.py`` in the package's test folder (sub-packages as sub-folders); a
    package's ``__init__`` is tested in ``test_<package>.py``."""
    package = next(p for p in MIRRORS if module.is_relative_to(p))
    relative = module.relative_to(package)
    folder = MIRRORS[package].joinpath(*relative.parent.parts)
    if relative.stem != "__init__":
        return folder / f"test_{relative.stem}.py"
    if relative.parent.parts:
        return folder.parent / f"test_{relative.parent.name}.py"
    return folder / f"test_{package.name}.py"


def code_under_tests() -> list[Path]:
    """Test modules, conftests, builders and the harness alike."""
    return sorted(TESTS.rglob("*.py"))


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT))


def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def imported_modules(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """``(line, dotted name)`` of every module an import names, and of every name a ``from``
    import takes (which may be a module of that package)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}" if node.module else base + alias.name


def edits_the_import_path(tree: ast.Module) -> list[int]:
    """Lines that touch ``sys.path``: as an attribute, imported from ``sys``, or through
    pytest's ``syspath_prepend``."""
    lines = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "path"
            and isinstance(node.value, ast.Name)
            and node.value.id == "sys"
        ) or (isinstance(node, ast.Attribute) and node.attr == "syspath_prepend"):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "sys":
            lines.extend(node.lineno for alias in node.names if alias.name == "path")
    return lines


@pytest.mark.parametrize("module", list(source_modules()), ids=lambda p: shown(p))
def test_every_source_module_has_a_mirroring_test_file(module: Path) -> None:
    if shown(module) in WITHOUT_TEST_FILE or module in layer_packages():
        return
    expected = mirrored_test_file(module)
    assert expected.exists(), (
        f"{shown(module)} has no test file: add {shown(expected)} "
        "(or, if it needs none, say why in WITHOUT_TEST_FILE in tests/test_layout.py)"
    )


@pytest.mark.parametrize("init", layer_packages(), ids=lambda p: shown(p))
def test_every_layer_package_holds_only_a_docstring_of_what_it_is_and_may_import(
    init: Path,
) -> None:
    """A layer re-exports nothing: its modules are imported by their own paths."""
    assert holds_only_a_docstring(parsed(init)), f"{shown(init)}: a docstring and nothing else"
    assert "import" in (ast.get_docstring(parsed(init)) or "").lower(), "what it may import"


def test_the_packages_are_split_into_layers() -> None:
    assert {init.parent.name for init in layer_packages()} >= {"core", "wire", "decide"}


@pytest.mark.parametrize("listed", sorted(WITHOUT_TEST_FILE))
def test_every_module_excused_from_a_test_file_exists_and_still_has_none(listed: str) -> None:
    module = ROOT / listed
    assert module.exists(), f"{listed} is gone: drop it from WITHOUT_TEST_FILE"
    assert not mirrored_test_file(module).exists(), f"{listed} has a test file now"


def test_no_test_module_imports_another() -> None:
    found = [
        f"{shown(path)}:{line} imports {name}"
        for path in code_under_tests()
        for line, name in imported_modules(parsed(path))
        if name.rsplit(".", 1)[-1].startswith("test_")
    ]
    assert not found, (
        "move what test modules share into a builder module or a conftest fixture:\n"
        + "\n".join(found)
    )


def test_no_test_edits_the_import_path() -> None:
    found = [
        f"{shown(path)}:{line}"
        for path in code_under_tests()
        for line in edits_the_import_path(parsed(path))
    ]
    assert not found, (
        "pytest puts the repository root on the path (pyproject.toml): import through "
        "`tests.` instead of editing sys.path:\n" + "\n".join(found)
    )


@pytest.mark.parametrize(
    ("module", "test_file"),
    [
        pytest.param(
            "profiler/roofline_profiler/cli/plot.py", "tests/profiler/cli/test_plot.py", id="plot"
        ),
        pytest.param(
            "operator/roofline_operator/core/names.py",
            "tests/operator/unit/core/test_names.py",
            id="names",
        ),
        pytest.param("cli/roofline_cli/__init__.py", "tests/cli/test_roofline_cli.py", id="init"),
        pytest.param(
            "profiler/roofline_profiler/wire/schema/x.py",
            "tests/profiler/wire/schema/test_x.py",
            id="sub-sub-package",
        ),
        pytest.param(
            "profiler/roofline_profiler/wire/__init__.py",
            "tests/profiler/test_wire.py",
            id="sub-package-init",
        ),
    ],
)
def test_the_mirror_of_a_module_is_its_test_file_in_the_packages_test_folder(
    module: str, test_file: str
) -> None:
    assert shown(mirrored_test_file(ROOT / module)) == test_file


@pytest.mark.parametrize(
    ("source", "offences"),
    [
        pytest.param(
            "from tests.operator.unit.test_reconcile import RecordingClient", 1, id="from"
        ),
        pytest.param("import tests.profiler.test_cli", 1, id="import"),
        pytest.param("from tests.profiler import test_cli", 1, id="from-package"),
        pytest.param("from .test_round_plan import world", 1, id="relative"),
        pytest.param("from tests.operator.unit.round_builders import world", 0, id="builder"),
    ],
)
def test_imports_of_test_modules_are_told_from_imports_of_builders(
    source: str, offences: int
) -> None:
    names = [name for _, name in imported_modules(ast.parse(source))]
    assert sum(n.rsplit(".", 1)[-1].startswith("test_") for n in names) == offences, names


@pytest.mark.parametrize(
    ("source", "only"),
    [
        pytest.param('"""The layer."""', True, id="docstring"),
        pytest.param('"""The layer."""\nfrom .x import y', False, id="re-export"),
        pytest.param("x = 1", False, id="no-docstring"),
    ],
)
def test_a_package_holding_only_its_docstring_is_told_apart(source: str, only: bool) -> None:
    assert holds_only_a_docstring(ast.parse(source)) is only


@pytest.mark.parametrize(
    ("source", "edits"),
    [
        pytest.param("import sys\nsys.path.insert(0, 'x')", 1, id="insert"),
        pytest.param("import sys\nsys.path[:0] = ['x']", 1, id="slice"),
        pytest.param("from sys import path\npath.append('x')", 1, id="from-sys"),
        pytest.param("def t(monkeypatch):\n    monkeypatch.syspath_prepend('x')", 1, id="pytest"),
        pytest.param("import sys\nsys.argv.append('x')", 0, id="other-sys"),
    ],
)
def test_edits_of_the_import_path_are_found(source: str, edits: int) -> None:
    assert len(edits_the_import_path(ast.parse(source))) == edits
