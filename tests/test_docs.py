"""The README and the docs: short where they must be, and every command, link and number in them
true to the code."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from roofline_profiler.wire.result import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCUMENTS = [README, ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    found = set()
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        match = None if in_code else re.match(r"^#{1,6} (.+)$", line)
        if match:
            text = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower())
            found.add(text.replace(" ", "-"))
    return found


def test_the_readme_is_short_and_install_comes_early() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 200
    headings = [i for i, line in enumerate(lines) if line.startswith("## ")]
    install = next(i for i in headings if "Install" in lines[i])
    assert install < 110, f"Install starts at line {install + 1}"
    assert any("validated" in lines[i] for i in headings), "what has been validated, and where"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_to_a_file_and_heading(document: Path) -> None:
    broken = []
    for target in LINK.findall(document.read_text()):
        if re.match(r"^[a-z]+:", target):
            continue
        path_part, _, anchor = target.partition("#")
        path = (document.parent / path_part).resolve() if path_part else document
        if not path.exists():
            broken.append(target)
            continue
        if anchor and path.suffix == ".md" and anchor not in anchors(path.read_text()):
            broken.append(target)
    assert not broken, f"{document.name}: {broken}"


def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([a-z][\w-]*):", text, flags=re.M))


def test_every_make_command_in_the_readme_names_a_target() -> None:
    targets = make_targets()
    used = set(re.findall(r"`?make ([a-z][\w-]*)", README.read_text()))
    assert used
    missing = used - targets
    assert not missing, missing


def test_the_readme_states_the_schema_version_outputs_carry() -> None:
    stated = set(re.findall(r"schemaVersion: (\d+)", README.read_text()))
    assert stated == {str(SCHEMA_VERSION)}


def test_the_torch_index_reaches_pip_as_its_own_arguments(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    dry_run = subprocess.run(
        [
            "make",
            "-n",
            f"{venv}/.torch",
            f"VENV={venv}",
            "TORCH_SPEC=torch==2.9.0",
            "TORCH_INDEX_URL=https://download.pytorch.org/whl/rocm6.4",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    command = dry_run.stdout.replace("\\\n", " ")
    install = next(line for line in command.splitlines() if "import torch" in line)
    words = shlex.split(install.split("||", 1)[1])
    rocm = "https://download.pytorch.org/whl/rocm6.4"
    assert words[-3:] == ["torch==2.9.0", "--index-url", rocm], words
    default = subprocess.run(
        ["make", "-n", f"{venv}/.torch", f"VENV={venv}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.replace("\\\n", " ")
    assert "--index-url" not in default


def test_the_operator_has_a_setup_target() -> None:
    assert "setup-operator" in make_targets()
    assert ".[profiler,operator]" in (ROOT / "Makefile").read_text()


ARCHITECTURE = ROOT / "docs" / "architecture.md"
#: The source packages; the architecture lists every module of each and of each of its layers
#: (sub-packages), one table a folder.
PACKAGES = ("profiler/roofline_profiler", "operator/roofline_operator", "cli/roofline_cli")
FOLDERS = [
    *PACKAGES,
    *(
        str(init.parent.relative_to(ROOT))
        for p in PACKAGES
        for init in (ROOT / p).glob("*/__init__.py")
    ),
]


def module_tables(markdown: str) -> dict[str, set[str]]:
    """The modules each ``### ... (`<folder>`)`` section's table lists, by folder."""
    tables: dict[str, set[str]] = {}
    rows: set[str] | None = None
    for line in markdown.splitlines():
        heading = re.match(r"^#{2,4} .*\(`([^`]+)`\)\s*$", line)
        if heading:
            rows = tables.setdefault(heading.group(1), set())
        elif line.startswith("#"):
            rows = None
        elif rows is not None and (cell := re.match(r"^\| `([\w.]+)` \|", line)):
            rows.add(cell.group(1))
    return tables


@pytest.mark.parametrize("package", sorted(FOLDERS))
def test_the_architecture_lists_every_module_of_every_package_and_layer(package: str) -> None:
    listed = module_tables(ARCHITECTURE.read_text()).get(package, set())
    modules = {p.stem for p in (ROOT / package).glob("*.py")}
    missing = [f"{package}/{name}.py" for name in sorted(modules - listed)]
    stale = [f"{package}/{name}.py" for name in sorted(listed - modules)]
    assert not missing, f"docs/architecture.md has no row for {', '.join(missing)}"
    assert not stale, f"docs/architecture.md lists modules that do not exist: {', '.join(stale)}"


def test_the_architecture_says_where_each_kind_of_change_goes() -> None:
    text = ARCHITECTURE.read_text()
    for change in ("measurement", "status field", "metric", "model architecture"):
        assert f"- **A new {change}**:" in text, f"where a new {change} goes"
