"""Golden files: text a test pins byte for byte, rewritten on request after a deliberate change.

``ROOFLINE_UPDATE_GOLDEN=1`` rewrites every golden file a test run reaches instead of comparing;
the diff of the rewritten files is then the change to review.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

UPDATE_VARIABLE = "ROOFLINE_UPDATE_GOLDEN"


def check_golden(path: Path, text: str, regenerate: str) -> None:
    """Assert that ``text`` is the content of ``path``; ``regenerate`` is the pytest target whose
    run with :data:`UPDATE_VARIABLE` set rewrites it."""
    if os.environ.get(UPDATE_VARIABLE):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), (
        f"{path.name} is missing; create it with {UPDATE_VARIABLE}=1 pytest {regenerate}"
    )
    expected = path.read_text(encoding="utf-8")
    assert text == expected, (
        f"{path.name} changed; if the change is deliberate, regenerate it with "
        f"{UPDATE_VARIABLE}=1 pytest {regenerate} and review the diff"
    )


def pretty_json(document: Any) -> str:
    """``document`` as golden text: indented, keys sorted, one final newline."""
    return json.dumps(document, indent=2, sort_keys=True) + "\n"
