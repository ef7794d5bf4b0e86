from __future__ import annotations

from typing import Any

from tests.operator.unit.operator_builders import GPU, spec

from roofline_operator.labels import LABEL_VALUE
from roofline_operator.pods import (
    ProfileRef,
    build_profiler_pod,
    parse_time,
    pod_facts,
    profiler_pod_name,
)

OWNER = ProfileRef(name="fleet", uid="uid-1")


def build(**fields: Any) -> dict[str, Any]:
    return build_profiler_pod(
        profile=OWNER,
        spec=spec(**fields),
        node="gpu-7",
        gpus=8,
        attempt=2,
        spec_hash="abc123",
        namespace="roofline-system",
        image="registry.local/roofline:1",
    )


def container(pod: dict[str, Any]) -> dict[str, Any]:
    containers = pod["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def test_pod_requests_the_gpus_it_profiles_as_a_limit() -> None:
    pod = build(resources={"requests": {"cpu": "2"}, "limits": {"memory": "8Gi"}})
    resources = container(pod)["resources"]
    assert resources["limits"] == {"memory": "8Gi", GPU: "8"}
    assert resources["requests"] == {"cpu": "2"}


def test_pod_is_pinned_to_its_node_through_the_scheduler() -> None:
    pod = build()
    assert "nodeName" not in pod["spec"]
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-7"]}]}
    ]


def test_pod_runs_locked_down() -> None:
    pod = build()
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert pod["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    security = container(pod)["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}


def test_pod_hands_its_result_back_through_the_termination_message() -> None:
    main = container(build())
    assert main["name"] == "profiler"
    command = main["command"]
    assert command[:2] == ["roofline", "profile"]
    assert command[command.index("--compact") + 1] == main["terminationMessagePath"]
    assert main["terminationMessagePolicy"] == "FallbackToLogsOnError"


def test_pod_command_carries_the_measurement_fields_of_the_spec() -> None:
    command = container(
        build(
            dtype="float16",
            shape={"k": 4096, "n": 2048},
            batches=[8, 1],
            minBatchEfficiencyPercent=75,
            quick=True,
        )
    )["command"]
    text = " ".join(command)
    assert "--dtype float16" in text
    assert "--shape 4096x2048" in text
    assert "--batches 1,8" in text
    assert "--min-batch-efficiency 75" in text
    assert "--quick" in command


def test_pod_uses_the_spec_image_over_the_operator_default() -> None:
    assert container(build())["image"] == "registry.local/roofline:1"
    assert container(build(image="mirror/roofline:2"))["image"] == "mirror/roofline:2"


def test_pod_carries_the_contract_labels_and_an_owner_reference() -> None:
    metadata = build()["metadata"]
    assert metadata["labels"] == {
        "app.kubernetes.io/name": "roofline-profiler",
        "app.kubernetes.io/managed-by": "roofline-operator",
        "roofline.dev/profile": "fleet",
        "roofline.dev/node": "gpu-7",
    }
    (owner,) = metadata["ownerReferences"]
    assert owner["kind"] == "RooflineProfile"
    assert owner["apiVersion"] == "roofline.dev/v1alpha1"
    assert (owner["name"], owner["uid"], owner["controller"]) == ("fleet", "uid-1", True)


def test_pod_deadline_is_the_profile_timeout() -> None:
    assert build(timeoutSeconds=120)["spec"]["activeDeadlineSeconds"] == 120


def test_pod_names_are_deterministic_short_and_distinct_per_attempt() -> None:
    long_node = "ip-10-0-0-1.eu-west-1.compute.internal.example.with.a.very.long.suffix"
    first = profiler_pod_name("fleet", long_node, "abc", 1)
    assert first == profiler_pod_name("fleet", long_node, "abc", 1)
    assert first != profiler_pod_name("fleet", long_node, "abc", 2)
    assert first != profiler_pod_name("fleet", long_node, "def", 1)
    assert len(first) <= 63
    assert LABEL_VALUE.match(first)


def test_pod_facts_read_back_what_the_kubelet_wrote() -> None:
    pod = build()
    pod["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    pod["spec"]["nodeName"] = "gpu-7"
    pod["status"] = {
        "phase": "Failed",
        "startTime": "2026-01-01T00:00:05Z",
        "containerStatuses": [
            {
                "name": "profiler",
                "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled", "message": ""}},
            }
        ],
    }
    facts = pod_facts(pod)
    assert (facts.profile, facts.node, facts.attempt, facts.spec_hash) == (
        "fleet",
        "gpu-7",
        2,
        "abc123",
    )
    assert facts.phase == "Failed"
    assert facts.bound
    assert not facts.deleting
    assert facts.created_at == parse_time("2026-01-01T00:00:00Z")
    assert facts.started_at == parse_time("2026-01-01T00:00:05Z")
    assert facts.terminated is not None
    assert (facts.terminated.exit_code, facts.terminated.reason) == (137, "OOMKilled")


def test_a_new_pod_without_status_is_pending_and_unbound() -> None:
    facts = pod_facts(build())
    assert facts.phase == "Pending"
    assert not facts.bound
    assert facts.terminated is None


def test_malformed_timestamps_read_as_unknown() -> None:
    assert parse_time("yesterday") is None
    assert parse_time(None) is None
    assert parse_time("2026-01-01T00:00:00Z") == 1767225600.0
