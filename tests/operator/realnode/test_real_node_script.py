"""``scripts/real-node.py``, the real node for a person: a working cluster, then nothing left.

The script starts the node the suite starts, prints the kubeconfig and waits for Enter; this test
uses the cluster it prints as a person would (the node Ready, the fake GPU allocatable), presses
Enter, and checks that the script stopped what it started and put the host back as it was.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.operator.harness import hoststate, hostundo
from tests.operator.harness.nodeconfig import BRIDGE, GPU_RESOURCE, NODE_NAME

pytestmark = pytest.mark.timeout(600)

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "real-node.py"


def test_the_real_node_script_gives_a_working_cluster_and_leaves_nothing_behind(
    node_binaries: tuple[Path, Path],
) -> None:
    before = hoststate.snapshot()
    script = subprocess.Popen(
        [sys.executable, "-u", str(SCRIPT)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert script.stdin is not None
    assert script.stdout is not None
    printed: list[str] = []
    try:
        exports: dict[str, str] = {}
        for line in script.stdout:
            printed.append(line)
            if line.startswith(("export KUBECONFIG=", "alias kubectl=")):
                key, value = line.strip().removeprefix("export ").split("=", 1)
                exports[key] = value
            if len(exports) == 2:
                break
        assert len(exports) == 2, "".join(printed)
        kubectl = [exports["alias kubectl"], "--kubeconfig", exports["KUBECONFIG"]]
        node = json.loads(
            subprocess.run(
                [*kubectl, "get", "node", NODE_NAME, "-o", "json"],
                capture_output=True,
                text=True,
                check=True,
                timeout=60,
            ).stdout
        )
        ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"]
        assert ready == "True", node["status"]["conditions"]
        assert node["status"]["allocatable"].get(GPU_RESOURCE) == "1", node["status"]
        script.stdin.write("\n")
        script.stdin.flush()
        rest, _ = script.communicate(timeout=300)
        printed.append(rest)
    finally:
        if script.poll() is None:
            script.terminate()  # SIGTERM stops the node as Enter does
            script.wait(timeout=300)
    assert script.returncode == 0, "".join(printed)
    assert "the host is as it was" in rest
    assert not hostundo.node_leftovers(BRIDGE)
    assert hoststate.differences(before, hoststate.snapshot()) == [], "".join(printed)
