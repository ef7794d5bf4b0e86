"""The property tests' two profiles (``tests/conftest.py``): reproducible in ``make test``, ten
times the examples and random in ``make fuzz``."""

from __future__ import annotations

import os
import re
from pathlib import Path

from hypothesis import settings

from tests.conftest import CI_EXAMPLES, PROFILE_VARIABLE

ROOT = Path(__file__).resolve().parents[1]


def test_the_suite_runs_the_derandomized_ci_profile_unless_told_otherwise() -> None:
    if os.environ.get(PROFILE_VARIABLE, "ci") != "ci":
        return  # make fuzz: the random profile, checked below
    assert settings.default.derandomize is True
    assert settings.default.max_examples == CI_EXAMPLES
    assert settings.default.database is None, "nothing is written to the tree"


def test_the_fuzz_profile_draws_ten_times_the_examples_at_random() -> None:
    fuzz = settings.get_profile("fuzz")
    assert fuzz.max_examples >= 10 * settings.get_profile("ci").max_examples
    assert fuzz.derandomize is False
    assert fuzz.print_blob is True, "a failure prints how to reproduce it"


def test_make_fuzz_runs_every_property_test_under_the_fuzz_profile() -> None:
    makefile = (ROOT / "Makefile").read_text()
    (recipe,) = re.findall(r"^fuzz:.*\n((?:\t.*\n)+)", makefile, flags=re.MULTILINE)
    assert f"{PROFILE_VARIABLE}=fuzz" in recipe
    assert '-m "hypothesis' in recipe


def test_no_property_test_sets_its_own_example_count() -> None:
    """A test's own ``max_examples`` would escape both profiles."""
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("*.py")
        if path.name not in ("conftest.py", Path(__file__).name)
        and "max_examples" in path.read_text()
    ]
    assert offenders == []
