"""Golden files of every form in which the profiler publishes a result, for one fixed input.

The input is the synthetic profile of ``synthetic.py`` (made-up timings through the profiler's own
assembly code, fixed creation time, host and seeded resampling), with and without model plans.
Pinned, byte for byte: the JSON document ``roofline profile --json`` writes, the compact text
``--compact`` writes (a pod's termination message) and what ``decode_compact`` reads back from it.
A refactor must leave these files identical; a deliberate change regenerates them with
``ROOFLINE_UPDATE_GOLDEN=1 pytest tests/profiler/test_published_forms.py`` and the diff is
reviewed. The operator's forms of the same result are pinned in
``tests/operator/unit/test_published_forms.py``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from roofline_profiler.cli import commands
from roofline_profiler.measure import runner
from roofline_profiler.wire.compact import encode_compact
from roofline_profiler.wire.compact_decode import decode_compact
from roofline_profiler.wire.result import ProfileResult, validate_document
from tests import golden
from tests.profiler.synthetic import planned_result, synthetic_result

GOLDEN = Path(__file__).parent / "golden"
REGENERATE = "tests/profiler/test_published_forms.py"
BUILDS = {"planned": planned_result, "unplanned": synthetic_result}


def check_golden(name: str, text: str) -> None:
    golden.check_golden(GOLDEN / name, text, REGENERATE)


def written_files(
    result: ProfileResult,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[str, str]:
    """The ``--json`` document and the ``--compact`` text of ``roofline profile`` measuring
    nothing: the runner hands back ``result``."""
    monkeypatch.setattr(runner, "run_profile", lambda request, dtypes, progress: result)
    document, compact = tmp_path / "result.json", tmp_path / "compact.txt"
    argv = ["profile", "--device", "cpu", "--json", str(document), "--compact", str(compact)]
    assert commands.main(argv) == 0
    capsys.readouterr()
    return document.read_text(encoding="utf-8"), compact.read_text(encoding="utf-8")


@pytest.mark.parametrize("kind", list(BUILDS))
def test_the_json_document_matches_its_golden_file(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    document, _ = written_files(BUILDS[kind](), tmp_path, monkeypatch, capsys)
    check_golden(f"result-{kind}.json", document)


@pytest.mark.parametrize("kind", list(BUILDS))
def test_the_compact_text_matches_its_golden_file(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, compact = written_files(BUILDS[kind](), tmp_path, monkeypatch, capsys)
    check_golden(f"compact-{kind}.txt", compact)


@pytest.mark.parametrize("kind", list(BUILDS))
def test_the_decoded_compact_text_matches_its_golden_file(kind: str) -> None:
    decoded = decode_compact(encode_compact(BUILDS[kind]().to_compact()))
    check_golden(f"compact-{kind}-decoded.json", golden.pretty_json(dataclasses.asdict(decoded)))


def test_building_the_synthetic_result_twice_gives_the_same_bytes() -> None:
    """Nothing of the clock, the host or an unseeded random source reaches the golden files."""
    first, second = planned_result(), planned_result()
    assert golden.pretty_json(first.to_dict()) == golden.pretty_json(second.to_dict())
    assert encode_compact(first.to_compact()) == encode_compact(second.to_compact())


def test_the_golden_json_document_is_valid_and_reads_back_to_the_same_document() -> None:
    """The pinned document is a result the published schema accepts, not just any text."""
    document = json.loads((GOLDEN / "result-planned.json").read_text(encoding="utf-8"))
    validate_document(document)
    assert ProfileResult.from_dict(document).to_dict() == document
