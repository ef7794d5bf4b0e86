"""The fake scheduler and kubelet run pods and report them as a real node would."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.operator.harness import Cluster, FaultMode, Kubectl, wait_for
from tests.operator.harness.kubelet import (
    MAX_MESSAGE_BYTES,
    container_env_value,
    termination_message,
)
from tests.operator.harness.scheduler import (
    UNTOLERATED_TAINT,
    insufficient,
    unschedulable_message,
)

from roofline_profiler.wire.compact_decode import decode_compact

TERMINATION_PATH = "/dev/termination-log"
WRITE_MESSAGE = "import sys; print('working'); open(sys.argv[1], 'w').write(sys.argv[2])"


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(tmp_path_factory.mktemp("kubelet"), FaultMode.RUN_COMMAND) as cluster:
        yield cluster
        assert not cluster.internal_errors()


def pod(name: str, node: str, command: list[str], gpus: int = 1, **spec: Any) -> dict[str, Any]:
    """A pod pinned like a profiler pod: required node affinity on ``metadata.name``."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
                }
            },
            "containers": [
                {
                    "name": "profiler",
                    "image": "stand-in",
                    "command": command,
                    "terminationMessagePath": TERMINATION_PATH,
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                }
            ],
            **spec,
        },
    }


def python(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", code, TERMINATION_PATH, *args]


def finished(cluster: Cluster, name: str) -> dict[str, Any]:
    def terminal() -> dict[str, Any] | None:
        found = cluster.get("pods", name, namespace="default")
        phase = (found or {}).get("status", {}).get("phase")
        return found if phase in ("Succeeded", "Failed") else None

    return wait_for(terminal, timeout=30, what=f"pod {name} to finish")


def terminated(found: dict[str, Any]) -> dict[str, Any]:
    state: dict[str, Any] = found["status"]["containerStatuses"][0]["state"]["terminated"]
    return state


def test_a_bound_pod_runs_its_command_and_reports_the_termination_message(
    nodes: Cluster, tmp_path: Path
) -> None:
    nodes.add_gpu_node("run-1")
    nodes.create(
        "pods", pod("runs", "run-1", python(WRITE_MESSAGE, "result-text")), namespace="default"
    )
    done = finished(nodes, "runs")
    assert done["spec"]["nodeName"] == "run-1"
    assert done["status"]["phase"] == "Succeeded"
    assert terminated(done) | {"startedAt": "", "finishedAt": "", "containerID": ""} == {
        "exitCode": 0,
        "reason": "Completed",
        "message": "result-text",
        "startedAt": "",
        "finishedAt": "",
        "containerID": "",
    }
    assert nodes.pod_log("default", "runs") == "working\n"
    kubectl = Kubectl(nodes.kubeconfig, tmp_path)
    assert kubectl("logs", "runs", "-n", "default").stdout == "working\n"


def test_the_termination_message_keeps_its_last_4096_bytes_as_a_kubelet_does(
    nodes: Cluster,
) -> None:
    """A kubelet reads the file from its end (``tail.ReadAtMost``): the tail survives."""
    nodes.add_gpu_node("run-2")
    tail = "t" * (MAX_MESSAGE_BYTES - 1) + "!"
    nodes.create(
        "pods", pod("long", "run-2", python(WRITE_MESSAGE, "h" * 1000 + tail)), namespace="default"
    )
    assert terminated(finished(nodes, "long"))["message"] == tail


@pytest.mark.parametrize(
    ("raw", "exit_code", "expected"),
    [
        pytest.param(b"", 1, "first line\nthe log's last line\n", id="empty-file-failed"),
        pytest.param(b"\n", 1, "\n", id="a-newline-is-a-message"),
        pytest.param(b"", 0, "", id="empty-file-succeeded"),
        pytest.param(b"x" * 5000 + b"end", 0, "x" * 4093 + "end", id="the-end-of-a-long-file"),
    ],
)
def test_the_log_tail_stands_in_only_for_an_empty_message_of_a_failed_container(
    raw: bytes, exit_code: int, expected: str
) -> None:
    """``FallbackToLogsOnError`` reads the log only when the file is empty (``len(data) == 0``
    in the kubelet), not when it holds white space."""
    log = "first line\nthe log's last line\n"
    message = termination_message(raw, "FallbackToLogsOnError", exit_code, log)
    assert message == expected


def test_a_failed_container_without_a_message_falls_back_to_its_log_tail(nodes: Cluster) -> None:
    nodes.add_gpu_node("run-3")
    command = python("import sys; print('cannot open device'); sys.exit(3)")
    nodes.create("pods", pod("falls-back", "run-3", command), namespace="default")
    done = finished(nodes, "falls-back")
    assert done["status"]["phase"] == "Failed"
    assert (terminated(done)["exitCode"], terminated(done)["reason"]) == (3, "Error")
    assert terminated(done)["message"] == "cannot open device\n", "the tail, newline and all"


def test_a_pod_needing_more_gpus_than_free_stays_pending_as_unschedulable(nodes: Cluster) -> None:
    nodes.add_gpu_node("busy", gpus=1)
    nodes.create(
        "pods", pod("greedy", "busy", python(WRITE_MESSAGE, "x"), gpus=2), namespace="default"
    )

    def unschedulable() -> dict[str, Any] | None:
        found = nodes.get("pods", "greedy", namespace="default") or {}
        conditions = found.get("status", {}).get("conditions", [])
        return next((c for c in conditions if c.get("reason") == "Unschedulable"), None)

    condition = wait_for(unschedulable, timeout=10, what="an Unschedulable condition")
    assert condition["status"] == "False"
    assert "1 Insufficient nvidia.com/gpu" in condition["message"]
    assert "1 No preemption victims found for incoming pod" in condition["message"]
    assert nodes.read("pods", "greedy", namespace="default")["status"]["phase"] == "Pending"


@pytest.mark.parametrize(
    ("reasons", "total", "written"),
    [
        pytest.param(
            {insufficient("nvidia.com/gpu"): 1},
            1,
            "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. no new claims to "
            "deallocate, preemption: 0/1 nodes are available: 1 No preemption victims found "
            "for incoming pod.",
            id="gpu-taken",
        ),
        pytest.param(
            {UNTOLERATED_TAINT: 1},
            1,
            "0/1 nodes are available: 1 node(s) had untolerated taint(s). no new claims to "
            "deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful for "
            "scheduling.",
            id="untolerated-taint",
        ),
    ],
)
def test_the_emulated_scheduler_words_its_reasons_as_kube_scheduler_does(
    reasons: dict[str, int], total: int, written: str
) -> None:
    """Word for word what kube-scheduler v1.35 wrote on the real node (tests/operator/realnode):
    the operator copies it into the node's status."""
    assert unschedulable_message(reasons, total) == written


def test_gpus_held_by_a_running_pod_keep_the_next_pod_waiting_until_it_ends(nodes: Cluster) -> None:
    nodes.add_gpu_node("shared", gpus=1)
    hold = python("import time, sys; time.sleep(3); open(sys.argv[1], 'w').write('held')")
    nodes.create("pods", pod("holder", "shared", hold), namespace="default")
    wait_for(
        lambda: (
            (nodes.get("pods", "holder", namespace="default") or {}).get("spec", {}).get("nodeName")
        ),
        timeout=10,
        what="the holder to be bound",
    )
    nodes.create("pods", pod("waiter", "shared", python(WRITE_MESSAGE, "ran")), namespace="default")
    waiter = nodes.read("pods", "waiter", namespace="default")
    assert not waiter["spec"].get("nodeName")
    assert terminated(finished(nodes, "waiter"))["message"] == "ran"
    assert nodes.read("pods", "holder", namespace="default")["status"]["phase"] == "Succeeded"


@pytest.mark.parametrize(
    ("mode", "phase", "exit_code", "reason"),
    [
        pytest.param(FaultMode.EXIT_NONZERO, "Failed", 1, "Error", id="exit-nonzero"),
        pytest.param(FaultMode.OOM_KILLED, "Failed", 137, "OOMKilled", id="oom-killed"),
        pytest.param(FaultMode.GARBAGE_MESSAGE, "Succeeded", 0, "Completed", id="garbage"),
        pytest.param(FaultMode.TRUNCATED_MESSAGE, "Succeeded", 0, "Completed", id="truncated"),
        pytest.param(FaultMode.SUCCEED_INSTANTLY, "Succeeded", 0, "Completed", id="instant"),
    ],
)
def test_fault_modes_end_pods_the_way_a_kubelet_reports_them(
    nodes: Cluster, mode: FaultMode, phase: str, exit_code: int, reason: str
) -> None:
    node = f"fault-{mode.value}"
    nodes.add_gpu_node(node, mode=mode)
    command = ["roofline", "profile", "--shape", "256x512", "--compact", TERMINATION_PATH]
    nodes.create("pods", pod(node, node, command), namespace="default")
    done = finished(nodes, node)
    state = terminated(done)
    assert (done["status"]["phase"], state["exitCode"], state["reason"]) == (
        phase,
        exit_code,
        reason,
    )
    if mode is FaultMode.SUCCEED_INSTANTLY:
        assert decode_compact(state["message"]).shape_k == 256
    if mode in (FaultMode.GARBAGE_MESSAGE, FaultMode.TRUNCATED_MESSAGE):
        with pytest.raises(ValueError, match="JSON"):
            decode_compact(state["message"])


def test_a_hanging_pod_is_failed_at_its_active_deadline(nodes: Cluster) -> None:
    nodes.add_gpu_node("hangs", mode=FaultMode.HANG)
    nodes.create(
        "pods", pod("hangs", "hangs", ["roofline"], activeDeadlineSeconds=1), namespace="default"
    )
    done = finished(nodes, "hangs")
    assert (done["status"]["phase"], done["status"]["reason"]) == ("Failed", "DeadlineExceeded")


def test_a_node_that_never_schedules_keeps_pods_pending(nodes: Cluster) -> None:
    nodes.add_gpu_node("full", mode=FaultMode.NEVER_SCHEDULE)
    nodes.create("pods", pod("starved", "full", ["roofline"]), namespace="default")

    def reason() -> str | None:
        found = nodes.get("pods", "starved", namespace="default") or {}
        return next((c.get("reason") for c in found.get("status", {}).get("conditions", [])), None)

    assert wait_for(reason, timeout=10, what="the scheduling verdict") == "Unschedulable"


def test_deleting_a_running_pod_kills_its_process_and_removes_it(nodes: Cluster) -> None:
    nodes.add_gpu_node("killed")
    sleeper = python("import time; print('started', flush=True); time.sleep(600)")
    nodes.create("pods", pod("sleeper", "killed", sleeper), namespace="default")
    wait_for(
        lambda: nodes.pod_log("default", "sleeper") == "started\n",
        timeout=20,
        what="the process to start",
    )
    nodes.delete("pods", "sleeper", namespace="default")
    wait_for(
        lambda: nodes.get("pods", "sleeper", namespace="default") is None,
        timeout=10,
        what="the pod to be gone",
    )


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace_period(nodes: Cluster) -> None:
    """As a kubelet does: SIGTERM first, SIGKILL once ``terminationGracePeriodSeconds`` passed."""
    nodes.add_gpu_node("stubborn")
    code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('started', flush=True); time.sleep(600)"
    )
    spec = {"terminationGracePeriodSeconds": 1}
    nodes.create("pods", pod("ignores", "stubborn", python(code), **spec), namespace="default")
    wait_for(lambda: nodes.pod_log("default", "ignores") == "started\n", timeout=20, what="start")
    nodes.delete("pods", "ignores", namespace="default")
    (run,) = wait_for(
        lambda: [r for r in nodes.runs(["stubborn"]) if r.ended is not None] or None,
        timeout=20,
        what="the run to end",
    )
    assert run.stopped_by == "SIGKILL"


@pytest.mark.slow
def test_a_deleted_profiler_pod_stops_its_real_profiler_on_sigterm(nodes: Cluster) -> None:
    """The real ``roofline profile``, deleted while it measures, ends on SIGTERM within
    seconds, long before its grace period: a deleted pod frees its device at once."""
    nodes.add_gpu_node("deleted-mid-run")
    command = ["roofline", "profile", "--device", "cpu", "--compact", TERMINATION_PATH]
    nodes.create("pods", pod("measuring", "deleted-mid-run", command), namespace="default")
    wait_for(
        lambda: nodes.runs(["deleted-mid-run"]) or None,
        timeout=30,
        what="the profiler to start",
    )
    time.sleep(8)  # torch imported, measuring (a default profile takes a minute here)
    deleted = time.monotonic()
    nodes.delete("pods", "measuring", namespace="default")
    (run,) = wait_for(
        lambda: [r for r in nodes.runs(["deleted-mid-run"]) if r.ended is not None] or None,
        timeout=40,
        what="the run to end",
    )
    assert run.stopped_by == "SIGTERM", "it stopped within its grace period"
    assert run.ended is not None
    assert run.ended - deleted < 10


def test_the_fake_kubelet_resolves_downward_api_env_like_a_kubelet() -> None:
    pod = {"metadata": {"name": "p"}, "spec": {"nodeName": "gpu-3"}}
    assert container_env_value(pod, {"name": "A", "value": "x"}) == "x"
    field = {"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
    assert container_env_value(pod, field) == "gpu-3"
