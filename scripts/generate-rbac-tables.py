#!/usr/bin/env python3
"""Regenerate the RBAC tables of docs/operator.md and docs/deploy.md from the operator's table of
permissions (``roofline_operator.run.permissions``).

The table in the code is the one source; each document holds its rendering (``markdown_table``)
in place of the table that starts with the same header. tests/deploy/test_rbac.py fails when a
document's table differs from a fresh rendering.

    python scripts/generate-rbac-tables.py           # rewrite the tables
    python scripts/generate-rbac-tables.py --check   # exit 1 if a table is stale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = (ROOT / "docs" / "operator.md", ROOT / "docs" / "deploy.md")

sys.path.insert(0, str(ROOT / "operator"))
sys.path.insert(0, str(ROOT / "profiler"))

from roofline_operator.run.permissions import markdown_table  # noqa: E402


def with_table(text: str, table: str) -> str:
    """``text`` with the table that starts with ``table``'s header replaced by ``table``."""
    header = table.splitlines()[0]
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.rstrip("\n") == header)
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return "".join(lines[:start]) + table + "".join(lines[end:])


def stale_documents() -> list[Path]:
    table = markdown_table()
    return [path for path in DOCUMENTS if with_table(path.read_text(), table) != path.read_text()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a table is stale")
    args = parser.parse_args(argv)
    stale = stale_documents()
    if args.check:
        for path in stale:
            print(f"stale RBAC table: {path.relative_to(ROOT)}", file=sys.stderr)
        return 1 if stale else 0
    table = markdown_table()
    for path in stale:
        path.write_text(with_table(path.read_text(), table))
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
