"""One reconcile round of the engine, with an in-memory API client in place of the cluster."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import replace

import kopf
import pytest
from tests.operator.unit.loop_builders import as_patched, loop_with
from tests.operator.unit.operator_builders import device, fresh_succeeded_pod, node, profile
from tests.operator.unit.recording_client import RecordingClient

from roofline_operator.core.names import LABEL_PROFILE, FailureReason, NodeState
from roofline_operator.core.node_results import to_status
from roofline_operator.decide.pods import PodFacts, Terminated, pod_facts, profiler_pod_name
from roofline_operator.decide.round_plan import POD_APPEARANCE_GRACE_SECONDS
from roofline_operator.run.reconcile import batch_window, first_of
from roofline_profiler.wire.compact import encode_compact

pytestmark = pytest.mark.usefixtures("quiet_events")


def succeeded(client: RecordingClient, index: int = 0) -> PodFacts:
    """The ``index``-th pod the loop created, as the watch shows it once it succeeded."""
    pod = pod_facts(client.created[index])
    return fresh_succeeded_pod(pod.name, pod.node, pod.spec_hash, pod.attempt)


@pytest.mark.asyncio
async def test_a_round_creates_pods_and_writes_status_once() -> None:
    client = RecordingClient()
    loop = loop_with(client, {"maxParallel": 10})
    nodes = {n: node(n) for n in ("a", "b", "c")}
    await loop.round(nodes, [], {})
    assert len(client.created) == 3
    assert len(client.statuses) == 1
    status = client.statuses[0]
    assert status["observedGeneration"] == 4
    assert status["summary"]["matched"] == 3
    assert [n["state"] for n in status["nodes"]] == ["Profiling"] * 3

    await loop.round(nodes, [], {})
    assert len(client.created) == 3, "the same world must not create pods again"
    assert len(client.statuses) == 1, "an unchanged status is not written again"


@pytest.mark.asyncio
async def test_results_become_labels_and_the_pod_is_deleted_exactly_once(
    quiet_events: list[tuple[str, str]],
) -> None:
    client = RecordingClient()
    loop = loop_with(client, {})
    nodes = {"a": node("a")}
    await loop.round(nodes, [], {})
    done = succeeded(client)
    await loop.round(nodes, [done], {})
    await loop.round(nodes, [done], {})  # the watch still shows the pod
    assert client.deleted == []
    assert client.collections == [
        (
            "default",
            "app.kubernetes.io/managed-by=roofline-operator,roofline.dev/profile=fleet,"
            "roofline.dev/node in (a)",
            "status.phase!=Pending,status.phase!=Running",
        )
    ]
    assert [name for name, _ in client.labelled] == ["a"]
    assert client.labelled[0][1][LABEL_PROFILE] == "fleet"
    assert loop.records["a"].state is NodeState.PROFILED
    assert ("Profiled", "Profiled 1 node(s): a") in quiet_events


@pytest.mark.asyncio
async def test_finished_pods_are_collected_before_the_round_creates_pods() -> None:
    client = RecordingClient()
    loop = loop_with(client, {"maxParallel": 1})
    nodes = {n: node(n) for n in ("a", "b")}
    await loop.round(nodes, [], {})
    first = pod_facts(client.created[0])
    assert first.node == "a"
    client.calls.clear()
    await loop.round(nodes, [fresh_succeeded_pod(first.name, "a", first.spec_hash)], {})
    assert client.calls == ["collect", "create", "patch node"]
    assert pod_facts(client.created[1]).node == "b"


@pytest.mark.asyncio
async def test_a_refused_collection_falls_back_to_one_delete_per_finished_pod(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = RecordingClient(refuse_collections=True)
    loop = loop_with(client, {})
    nodes = {n: node(n) for n in ("a", "b")}
    await loop.round(nodes, [], {})
    a, b = (pod_facts(p) for p in client.created)
    with caplog.at_level(logging.WARNING, logger="roofline_operator.run.reconcile"):
        await loop.round(nodes, [fresh_succeeded_pod(a.name, "a", a.spec_hash)], {})
    assert client.deleted == [("default", a.name)]
    assert "deletecollection" in caplog.text
    await loop.round(nodes, [fresh_succeeded_pod(b.name, "b", b.spec_hash)], {})
    assert client.deleted[-1] == ("default", b.name)
    assert client.calls.count("collect") == 1, "a refused collection is not tried again"


@pytest.mark.asyncio
async def test_a_running_pod_of_a_node_that_stopped_matching_is_deleted_by_name() -> None:
    client = RecordingClient()
    loop = loop_with(client, {})
    await loop.round({"a": node("a")}, [], {})
    pod = pod_facts(client.created[0])
    running = replace(pod, phase="Running", started_at=1001.0, bound=True)
    moved = replace(node("a"), labels={"pool": "a100"})
    await loop.round({"a": moved}, [running], {})
    assert client.deleted == [(pod.namespace, pod.name)]
    assert client.collections == []


@pytest.mark.asyncio
async def test_each_node_failure_is_logged_once_at_warning_with_reason_node_and_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = RecordingClient()
    loop = loop_with(client, {"retryBackoffSeconds": 60})
    nodes = {n: node(n) for n in ("a", "b")}
    await loop.round(nodes, [], {})
    pods = [pod_facts(p) for p in client.created]
    failed = [
        replace(p, phase="Failed", terminated=Terminated(1, "Error", "CUDA error: no device"))
        for p in pods
    ]
    with caplog.at_level(logging.WARNING, logger="roofline_operator.run.round_events"):
        await loop.round(nodes, failed, {})
        await loop.round(nodes, failed, {})  # the same failures seen again are not news
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert lines == [
        "Profile fleet: node a failed (PodFailed): CUDA error: no device",
        "Profile fleet: node b failed (PodFailed): CUDA error: no device",
    ]


@pytest.mark.asyncio
async def test_a_profile_loop_publishes_zero_counters_before_any_error() -> None:
    loop = loop_with(RecordingClient(), {})
    registry = loop.runtime.metrics.registry
    assert registry.get_sample_value("roofline_reconcile_errors_total", {"profile": "fleet"}) == 0
    failures = {"profile": "fleet", "reason": "Timeout"}
    assert registry.get_sample_value("roofline_profile_failures_total", failures) == 0


@pytest.mark.asyncio
async def test_a_refused_pod_is_a_per_node_failure_with_the_api_message(
    quiet_events: list[tuple[str, str]],
) -> None:
    client = RecordingClient(refuse_pods=True)
    loop = loop_with(client, {"retryBackoffSeconds": 60})
    wake_in = await loop.round({"a": node("a")}, [], {})
    record = loop.records["a"]
    assert (record.state, record.reason) == (NodeState.RETRYING, "PodRejected")
    assert record.message is not None
    assert "forbidden" in record.message
    assert wake_in is not None
    assert 59 < wake_in <= 60
    assert quiet_events[0][0] == "PodRejected"


@pytest.mark.asyncio
async def test_a_gpu_pod_that_measured_the_cpu_fails_its_node_with_a_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a container without its GPU did on a real node: exit 0 with the CPU's numbers. The
    node ends Failed with the causes in its status, a Warning Event, and no labels."""
    warnings: list[tuple[str, str]] = []
    monkeypatch.setattr(kopf, "warn", lambda _, reason, message: warnings.append((reason, message)))
    client = RecordingClient()
    loop = loop_with(client, {"maxAttempts": 1})
    nodes = {"a": node("a")}
    await loop.round(nodes, [], {})
    created = pod_facts(client.created[0])
    assert created.asked is not None
    assert created.asked.device == "cuda"
    cpu = replace(profile(device(name="Intel(R) Xeon(R) Processor")), created_at=time.time())
    message = encode_compact(replace(cpu, backend="cpu"))
    done = fresh_succeeded_pod(
        created.name, "a", created.spec_hash, created.attempt, message=message, asked=created.asked
    )
    await loop.round(nodes, [done], {})
    record = loop.records["a"]
    assert (record.state, record.reason) == (NodeState.FAILED, "WrongDevice")
    assert record.result is None
    assert client.labelled == []
    entry = client.statuses[-1]["nodes"][0]
    assert (entry["state"], entry["reason"]) == ("Failed", "WrongDevice")
    for cause in ("runtime class", "device plugin", "driver"):
        assert cause in entry["message"]
    ((reason, text),) = warnings
    assert reason == "WrongDevice"
    assert "Intel(R) Xeon(R) Processor" in text
    registry = loop.runtime.metrics.registry
    failures = {"profile": "fleet", "reason": "WrongDevice"}
    assert registry.get_sample_value("roofline_profile_failures_total", failures) == 1


@pytest.mark.asyncio
async def test_an_invalid_spec_is_reported_in_status_without_touching_the_cluster() -> None:
    client = RecordingClient()
    loop = loop_with(client, {"maxParallel": 0})
    assert await loop.round({"a": node("a")}, [], {}) is None
    assert client.created == []
    ready = client.statuses[0]["conditions"][0]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "False", "InvalidSpec")
    assert "maxParallel" in ready["message"]


@pytest.mark.asyncio
async def test_results_in_status_survive_a_restart() -> None:
    client = RecordingClient()
    loop = loop_with(client, {})
    nodes = {"a": node("a")}
    await loop.round(nodes, [], {})
    await loop.round(nodes, [succeeded(client)], {})
    written = loop.written

    restarted_client = RecordingClient()
    restarted = loop_with(restarted_client, {}, status=written)
    await restarted.round({"a": as_patched(node("a"), client)}, [], {})
    assert restarted_client.created == []
    assert restarted_client.calls == []
    assert restarted.records["a"].state is NodeState.PROFILED
    assert restarted_client.statuses == []


@pytest.mark.asyncio
async def test_the_record_annotation_goes_in_the_same_patch_as_the_labels() -> None:
    client = RecordingClient()
    loop = loop_with(client, {})
    nodes = {"a": node("a")}
    await loop.round(nodes, [], {})
    client.calls.clear()
    await loop.round(nodes, [succeeded(client)], {})
    assert client.calls.count("patch node") == 1
    ((name, annotations),) = client.annotated
    assert name == "a"
    assert set(annotations) == {"record.roofline.dev/fleet"}
    assert loop.records["a"].result is not None


@pytest.mark.asyncio
async def test_a_restart_rebuilds_records_from_node_annotations_when_status_omits_them() -> None:
    client = RecordingClient()
    loop = loop_with(client, {"maxParallel": 3})
    nodes = {n: node(n) for n in ("a", "b", "c")}
    await loop.round(nodes, [], {})
    await loop.round(nodes, [succeeded(client, i) for i in range(3)], {})
    patched = {n: as_patched(f, client) for n, f in nodes.items()}

    restarted_client = RecordingClient()
    restarted = loop_with(restarted_client, {}, status={"nodes": []})
    restarted.runtime.caches.nodes.start_priming()
    restarted.runtime.caches.nodes.finish_priming(patched.items())
    await restarted.restore(restarted_client)  # type: ignore[arg-type]
    await restarted.round(patched, [], {})
    assert restarted_client.created == []
    assert restarted_client.labelled == []
    assert restarted_client.annotated == []
    assert {n: r.state for n, r in restarted.records.items()} == dict.fromkeys(
        nodes, NodeState.PROFILED
    )
    restored, before = restarted.records["b"].result, loop.records["b"].result
    assert restored is not None
    assert before is not None
    assert to_status(restored) == to_status(before), "all but the step times (kept in memory)"


@pytest.mark.asyncio
async def test_a_pod_the_watch_never_shows_is_looked_up_once_before_it_counts_as_gone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [1000.0]
    monkeypatch.setattr("roofline_operator.run.reconcile.time.time", lambda: clock[0])
    client = RecordingClient()
    loop = loop_with(client, {"retryBackoffSeconds": 60})
    nodes = {"a": node("a")}
    await loop.round(nodes, [], {})
    pod = pod_facts(client.created[0])
    client.existing_pods.add(pod.name)
    clock[0] += POD_APPEARANCE_GRACE_SECONDS + 1
    await loop.round(nodes, [], {})
    assert client.pod_gets == [pod.name]
    await loop.round(nodes, [], {})
    assert client.pod_gets == [pod.name], "a pod the GET found gets another grace period"
    assert loop.records["a"].state is NodeState.PROFILING

    client.existing_pods.clear()
    clock[0] += POD_APPEARANCE_GRACE_SECONDS + 1
    await loop.round(nodes, [], {})
    assert client.pod_gets == [pod.name] * 2
    await loop.round(nodes, [], {})
    assert (loop.records["a"].state, loop.records["a"].reason) == (NodeState.RETRYING, "PodGone")
    assert len(client.pod_gets) == 2


@pytest.mark.asyncio
async def test_a_label_patch_that_failed_is_sent_again_next_round() -> None:
    client = RecordingClient(failing_label_patches=1)
    loop = loop_with(client, {})
    nodes = {"a": node("a")}
    await loop.round(nodes, [], {})
    done = succeeded(client)
    await loop.round(nodes, [done], {})
    assert client.labelled == []
    await loop.round(nodes, [done], {})
    assert [name for name, _ in client.labelled] == ["a"]
    assert (
        loop.runtime.metrics.registry.get_sample_value(
            "roofline_reconcile_errors_total", {"profile": "fleet"}
        )
        == 1
    )


def test_first_of_flattens_an_index() -> None:
    assert first_of({"a": [1, 2], "b": [], "c": [3]}) == {"a": 1, "c": 3}


def test_the_batch_window_is_the_configured_one_after_a_fast_round() -> None:
    assert batch_window(0.5, 0.01, 60.0) == 0.5


def test_the_batch_window_grows_to_the_last_rounds_duration_on_a_large_cluster() -> None:
    assert batch_window(0.5, 2.0, 60.0) == 2.0


def test_the_batch_window_never_delays_past_the_rounds_own_deadline() -> None:
    assert batch_window(0.5, 2.0, 1.0) == 1.0


def test_a_zero_batch_window_stays_off() -> None:
    assert batch_window(0.0, 2.0, 60.0) == 0.0


@pytest.mark.asyncio
async def test_a_profile_naming_a_namespace_the_operator_does_not_watch_is_an_invalid_spec() -> (
    None
):
    client = RecordingClient()
    loop = loop_with(client, {"namespace": "tenant-a"})
    assert await loop.round({"a": node("a")}, [], {}) is None
    assert client.created == []
    ready = client.statuses[0]["conditions"][0]
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
    assert "spec.namespace 'tenant-a' is not a profiler namespace" in ready["message"]
    assert "rbac.extraProfilerNamespaces" in ready["message"]


@pytest.mark.asyncio
async def test_an_extra_namespace_lets_a_profile_run_its_pods_there() -> None:
    client = RecordingClient()
    loop = loop_with(client, {"namespace": "tenant-a"})
    config = replace(loop.runtime.config, extra_namespaces=("tenant-a",))
    loop.runtime = replace(loop.runtime, config=config)
    await loop.round({"a": node("a")}, [], {})
    assert [p["metadata"]["namespace"] for p in client.created] == ["tenant-a"]


@pytest.mark.asyncio
async def test_an_unscheduled_pod_posts_a_normal_event_and_counts_no_failure(
    quiet_events: list[tuple[str, str]],
) -> None:
    client = RecordingClient()
    loop = loop_with(client, {"pendingTimeoutSeconds": 30, "retryBackoffSeconds": 60})
    await loop.round({"a": node("a")}, [], {})
    pending = replace(
        pod_facts(client.created[0]),
        created_at=0.0,
        bound=False,
        scheduler_message="0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
    )
    await loop.round({"a": node("a")}, [pending], {})
    assert loop.records["a"].state is NodeState.UNSCHEDULABLE
    ((reason, message),) = quiet_events
    assert reason == "Unschedulable"
    assert "1 node(s) could not schedule a profiler pod (a)" in message
    registry = loop.runtime.metrics.registry
    for failure in FailureReason:
        labels = {"profile": "fleet", "reason": failure.value}
        assert registry.get_sample_value("roofline_profile_failures_total", labels) == 0
    (status,) = [s for s in client.statuses if "summary" in s][-1:]
    assert status["summary"]["unschedulable"] == 1
    assert status["nodes"][0]["message"].endswith("1 Insufficient nvidia.com/gpu.")


@pytest.mark.asyncio
async def test_a_look_alike_pod_in_a_tenant_namespace_cannot_move_a_nodes_labels(
    quiet_events: list[tuple[str, str]],
) -> None:
    client = RecordingClient()
    loop = loop_with(client, {"reprofileInterval": "1h"})
    await loop.round({"a": node("a")}, [], {})
    await loop.round({"a": node("a")}, [succeeded(client)], {})
    labelled = as_patched(node("a"), client)
    genuine = dict(labelled.labels)
    assert genuine["roofline.dev/ridge-point"] == "180"
    client.labelled.clear()
    # Everything a tenant can copy from the status and the profile: attempt, spec digest, the
    # profile's UID as owner, even the name the operator would derive; only the namespace differs.
    record = loop.records["a"]
    forged_result = encode_compact(
        profile(device(ridge=1.0, bandwidth=9.999e12), created_at=time.time())
    )
    name = profiler_pod_name("fleet", "a", record.cycle_hash, 99)
    forged = fresh_succeeded_pod(
        name, "a", record.cycle_hash, 99, namespace="tenant-a", message=forged_result
    )
    for _ in range(3):
        await loop.round({"a": labelled}, [forged], {})
    assert client.labelled == [], "the forged result moved no label"
    assert ("tenant-a", name) not in client.deleted, "a pod that is not ours is left alone"
    assert not any(ns == "tenant-a" for ns, _, _ in client.collections)
    assert loop.records["a"].result is not None
    assert loop.records["a"].result.worst_gpu().ridge_point == 180.0
    ignored = loop.runtime.metrics.registry.get_sample_value(
        "roofline_foreign_pods_ignored_total", {"profile": "fleet"}
    )
    assert ignored == 1.0, "counted once, however many rounds see it"
    warnings = [m for reason, m in quiet_events if reason == "ForeignPodIgnored"]
    assert len(warnings) == 1
    assert "tenant-a/" in warnings[0]


@pytest.mark.asyncio
async def test_a_slower_node_is_published_announced_once_and_not_again_after_a_restart(
    quiet_events: list[tuple[str, str]],
) -> None:
    client = RecordingClient()
    loop = loop_with(client, {"maxParallel": 10})
    nodes = {n: node(n) for n in ("a", "b", "c", "slow")}
    await loop.round(nodes, [], {})
    pods = []
    for index, created in enumerate(client.created):
        pod = pod_facts(created)
        bandwidth = 3.3e12 if pod.node == "slow" else 4.3e12
        message = encode_compact(profile(device(bandwidth=bandwidth), created_at=time.time()))
        pods.append(
            fresh_succeeded_pod(pod.name, pod.node, pod.spec_hash, pod.attempt, message=message)
        )
        assert index < 4
    await loop.round(nodes, pods, {})
    status = client.statuses[-1]
    entries = {e["name"]: e for e in status["nodes"]}
    assert entries["slow"]["conditions"][0]["status"] == "True"
    assert entries["a"]["conditions"][0]["status"] == "False"
    assert status["classes"][0]["slowerNodes"] == ["slow"]
    announced = [m for reason, m in quiet_events if reason == "SlowerThanPeers"]
    assert len(announced) == 1
    assert announced[0].startswith("node slow: bandwidth 0.77 of the NVIDIA H200 median")
    samples = loop.runtime.metrics.registry.get_sample_value(
        "roofline_node_slower_than_peers",
        {"profile": "fleet", "node": "slow", "gpu_class": "NVIDIA H200"},
    )
    assert samples == 1.0

    await loop.round(nodes, [], {})
    restarted = loop_with(RecordingClient(), {"maxParallel": 10}, status=loop.written)
    await restarted.round({n: as_patched(f, client) for n, f in nodes.items()}, [], {})
    assert len([r for r, _ in quiet_events if r == "SlowerThanPeers"]) == 1


@pytest.mark.asyncio
async def test_a_record_annotation_naming_a_pod_namespace_never_widens_the_trusted_ones(
    quiet_events: list[tuple[str, str]],
) -> None:
    """Whoever may patch a Node wrote ``podNamespace`` (and ``pod``) into its record annotation;
    after a restart the profile believed pods there, and a look-alike in that namespace
    published 9,999 GB/s and a ridge point of 1."""
    client = RecordingClient()
    loop = loop_with(client, {"reprofileInterval": "1h"})
    await loop.round({"a": node("a")}, [], {})
    await loop.round({"a": node("a")}, [succeeded(client)], {})
    labelled = as_patched(node("a"), client)
    key = "record.roofline.dev/fleet"
    record = loop.records["a"]
    name = profiler_pod_name("fleet", "a", record.cycle_hash, 99)
    tampered = {**json.loads(labelled.records[key]), "podNamespace": "tenant-a", "pod": name}
    tampered_node = replace(labelled, records={key: json.dumps(tampered)})

    restarted_client = RecordingClient()
    restarted = loop_with(restarted_client, {"reprofileInterval": "1h"}, status={"nodes": []})
    restarted.runtime.caches.nodes.start_priming()
    restarted.runtime.caches.nodes.finish_priming([("a", tampered_node)])
    await restarted.restore(restarted_client)  # type: ignore[arg-type]
    assert restarted.records["a"].pod_namespace is None
    forged_result = encode_compact(
        profile(device(ridge=1.0, bandwidth=9.999e12), created_at=time.time())
    )
    forged = fresh_succeeded_pod(
        name, "a", record.cycle_hash, 99, namespace="tenant-a", message=forged_result
    )
    for _ in range(2):
        await restarted.round({"a": tampered_node}, [forged], {})
    assert restarted.pod_namespaces(restarted.valid_spec()) == {"default"}
    assert restarted_client.labelled == [], "the forged result moved no label"
    assert ("tenant-a", name) not in restarted_client.deleted
    result = restarted.records["a"].result
    assert result is not None
    assert result.worst_gpu().ridge_point == 180.0
    assert [r for r, _ in quiet_events].count("ForeignPodIgnored") == 1


#: What a failed pod may write to its termination message to act on whoever reads it: an ANSI
#: colour, an OSC 8 hyperlink ended by BEL, a right-to-left override and a zero-width space.
HOSTILE_MESSAGE = (
    "\x1b[31mCUDA\x1b[0m error: \x1b]8;;https://evil.example\x07click\x1b]8;;\x07 "
    "\u202egnp.exe\u202c\u200b done\x00\x7f\x9b"
)


@pytest.mark.asyncio
async def test_control_and_bidi_characters_of_a_pod_message_reach_no_reader(
    caplog: pytest.LogCaptureFixture, quiet_events: list[tuple[str, str]]
) -> None:
    client = RecordingClient()
    loop = loop_with(client, {"retryBackoffSeconds": 60})
    await loop.round({"a": node("a")}, [], {})
    pod = pod_facts(client.created[0])
    failed = replace(pod, phase="Failed", terminated=Terminated(1, "Error", HOSTILE_MESSAGE))
    with caplog.at_level(logging.WARNING, logger="roofline_operator.run.round_events"):
        await loop.round({"a": node("a")}, [failed], {})
    shown = client.statuses[-1]["nodes"][0]["message"]
    assert shown == "[31mCUDA[0m error: ]8;;https://evil.exampleclick]8;; gnp.exe done"
    (event,) = [message for reason, message in quiet_events if reason == "PodFailed"]
    (line,) = [r.getMessage() for r in caplog.records]
    for text in (shown, event, line):
        assert all(ch.isprintable() for ch in text), repr(text)


@pytest.mark.asyncio
async def test_a_look_alike_pod_with_our_labels_is_never_caught_by_a_collection() -> None:
    """The collection selects by labels alone: a finished pod with our labels that is not ours
    (no owner reference to the profile) was deleted with ours."""
    client = RecordingClient()
    loop = loop_with(client, {"maxParallel": 2})
    nodes = {n: node(n) for n in ("a", "b")}
    await loop.round(nodes, [], {})
    now = time.time()
    result = Terminated(0, "Completed", encode_compact(profile(created_at=now)))
    done = [
        replace(pod_facts(body), phase="Succeeded", created_at=now - 1, terminated=result)
        for body in client.created
    ]
    a = done[0]
    look_alike = replace(a, name="not-ours", owner_uids=("theirs",), phase="Failed")
    pods = loop.runtime.caches.pods
    pods.start_priming()
    pods.finish_priming([((p.namespace, p.name), p) for p in (*done, look_alike)])
    await loop.round(nodes, [*done, look_alike], {})
    ((_, selector, _),) = client.collections
    assert selector.endswith("roofline.dev/node in (b)"), "node a is left out"
    assert client.deleted == [("default", a.name)], "ours on node a goes by name"
