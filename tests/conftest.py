"""Settings of every property-based test (hypothesis), loaded before any test module.

Two profiles, chosen by ``HYPOTHESIS_PROFILE`` (default ``ci``):

* ``ci``: derandomized, so a run draws the same examples as the last one and a green suite means
  the same thing twice; :data:`CI_EXAMPLES` per test, no example database (nothing is written to
  the tree).
* ``fuzz``: random, :data:`FUZZ_EXAMPLES` per test (ten times ``ci``), what ``make fuzz`` runs
  before a change is done. A failure it finds prints the seed and a ``@reproduce_failure`` blob;
  it becomes an explicit ``@example`` of the test, with its fix, so that ``ci`` keeps it.

A test sets no ``max_examples`` of its own, so both profiles reach every test.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

#: Examples per property test in every ``make test`` run.
CI_EXAMPLES = 200
#: Examples per property test in ``make fuzz``.
FUZZ_EXAMPLES = 10 * CI_EXAMPLES
PROFILE_VARIABLE = "HYPOTHESIS_PROFILE"

_COMMON = settings(
    deadline=None,
    database=None,
    # Inputs of the properties are whole documents and rounds: slow to generate by design.
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile("ci", _COMMON, max_examples=CI_EXAMPLES, derandomize=True)
settings.register_profile("fuzz", _COMMON, max_examples=FUZZ_EXAMPLES, derandomize=False)
settings.load_profile(os.environ.get(PROFILE_VARIABLE, "ci"))
