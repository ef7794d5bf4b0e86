from __future__ import annotations

from typing import Any

import pytest
from kubernetes_validate import utils as kubernetes_validate
from tests.operator.harness.selectors import compile_selectors
from tests.operator.unit.operator_builders import GPU, spec

from roofline_operator.core.names import parse_time
from roofline_operator.decide.asked import ProfilerAsk
from roofline_operator.decide.labels import LABEL_VALUE, label_safe
from roofline_operator.decide.pods import (
    MAX_NODES_PER_COLLECTION,
    PodDefaults,
    PodFacts,
    ProfileRef,
    build_profiler_pod,
    finished_pod_collections,
    pod_facts,
    profiler_pod_name,
)

OWNER = ProfileRef(name="fleet", uid="uid-1")


LONG_NODE = "ip-10-0-0-1." + "eu-west-1.compute.internal." * 6 + "example"
LONG_PROFILE = "h200-decode-" + "fleet-" * 15 + "bf16"


def build(
    owner: ProfileRef = OWNER,
    node: str = "gpu-7",
    attempt: int = 2,
    defaults: PodDefaults | None = None,
    **fields: Any,
) -> dict[str, Any]:
    return build_profiler_pod(
        profile=owner,
        spec=spec(**fields),
        node=node,
        gpus=8,
        attempt=attempt,
        spec_hash="abc123",
        namespace="roofline-system",
        image="registry.local/roofline:1",
        defaults=defaults,
    )


def container(pod: dict[str, Any]) -> dict[str, Any]:
    containers = pod["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def test_pod_requests_the_gpus_it_profiles_as_a_limit() -> None:
    pod = build(resources={"requests": {"cpu": "2"}, "limits": {"memory": "8Gi"}})
    resources = container(pod)["resources"]
    assert resources["limits"] == {"memory": "8Gi", GPU: "8"}
    assert resources["requests"] == {"cpu": "2", "memory": "2Gi"}


def test_a_gpu_profiles_pod_asks_for_the_gpu_backend_not_any_device() -> None:
    """``--device all`` measures the CPU when the container sees no GPU; ``cuda`` refuses to."""
    command = container(build())["command"]
    assert command[command.index("--device") + 1] == "cuda"
    assert pod_facts(build()).asked == ProfilerAsk("cuda", "bfloat16", (4096, 14336))


def test_a_cpu_profiles_pod_measures_the_cpu_and_requests_no_gpu() -> None:
    pod = build(device="cpu", dtype="float32", resources={"limits": {"memory": "8Gi"}})
    command = container(pod)["command"]
    assert command[command.index("--device") + 1] == "cpu"
    assert GPU not in container(pod)["resources"]["limits"]
    assert pod_facts(pod).asked == ProfilerAsk("cpu", "float32", (4096, 14336))


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


def test_pod_annotations_carry_the_full_profile_and_node_names() -> None:
    annotations = build()["metadata"]["annotations"]
    assert annotations["roofline.dev/profile"] == "fleet"
    assert annotations["roofline.dev/node"] == "gpu-7"
    assert (annotations["roofline.dev/attempt"], annotations["roofline.dev/spec-hash"]) == (
        "2",
        "abc123",
    )


def test_names_longer_than_a_label_value_get_label_safe_labels_and_are_read_back_whole() -> None:
    pod = build(ProfileRef(name=LONG_PROFILE, uid="u"), LONG_NODE)
    labels = pod["metadata"]["labels"]
    assert labels["roofline.dev/node"] == label_safe(LONG_NODE) != LONG_NODE
    assert labels["roofline.dev/profile"] == label_safe(LONG_PROFILE) != LONG_PROFILE
    assert all(len(v) <= 63 and LABEL_VALUE.fullmatch(v) for v in labels.values())
    affinity = pod["spec"]["affinity"]["nodeAffinity"]
    term = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    assert term["matchFields"][0]["values"] == [LONG_NODE]
    facts = pod_facts(pod)
    assert (facts.profile, facts.node) == (LONG_PROFILE, LONG_NODE)


def test_pod_facts_fall_back_to_labels_for_pods_without_name_annotations() -> None:
    pod = build()
    for key in ("roofline.dev/profile", "roofline.dev/node"):
        del pod["metadata"]["annotations"][key]
    facts = pod_facts(pod)
    assert (facts.profile, facts.node) == ("fleet", "gpu-7")


def with_phase(pod: dict[str, Any], phase: str) -> dict[str, Any]:
    return {**pod, "status": {"phase": phase}}


def collected_by(collections: Any, pod: dict[str, Any]) -> bool:
    return any(
        c.namespace == pod["metadata"]["namespace"]
        and compile_selectors(c.label_selector, c.field_selector)(pod)
        for c in collections
    )


def test_a_collection_deletes_finished_pods_of_the_read_nodes_and_nothing_else() -> None:
    owner = ProfileRef(name=LONG_PROFILE, uid="u")
    done = build(owner, LONG_NODE, attempt=1)
    collections, singles = finished_pod_collections(
        LONG_PROFILE, [pod_facts(with_phase(done, "Failed"))]
    )
    assert singles == []
    assert [c.pods for c in collections] == [(done["metadata"]["name"],)]
    assert collected_by(collections, with_phase(done, "Succeeded"))
    assert collected_by(collections, with_phase(done, "Failed"))
    # A pod created after the round read the result (the next attempt), still pending or running.
    for phase in ("Pending", "Running"):
        assert not collected_by(collections, with_phase(build(owner, LONG_NODE, 3), phase))
    # The same node's finished pod of another profile, and another node of the same profile.
    assert not collected_by(collections, with_phase(build(OWNER, LONG_NODE), "Succeeded"))
    assert not collected_by(collections, with_phase(build(owner, "gpu-8"), "Succeeded"))


def test_collections_hold_at_most_a_hundred_nodes_per_namespace() -> None:
    def finished(node: str, namespace: str) -> PodFacts:
        return PodFacts(
            name=f"p-{node}",
            namespace=namespace,
            profile="fleet",
            node=node,
            attempt=1,
            spec_hash="h",
            phase="Succeeded",
        )

    pods = [finished(f"gpu-{i:03d}", "a") for i in range(250)] + [finished("gpu-0", "b")]
    collections, _ = finished_pod_collections("fleet", pods)
    assert [(c.namespace, len(c.pods)) for c in collections] == [
        ("a", MAX_NODES_PER_COLLECTION),
        ("a", MAX_NODES_PER_COLLECTION),
        ("a", 50),
        ("b", 1),
    ]
    assert sorted(n for c in collections for n in c.pods) == sorted(p.name for p in pods)


def test_a_node_where_a_look_alike_carries_our_labels_is_left_out_of_every_collection() -> None:
    """The collection selects by labels alone: a foreign pod with our labels, finished, was
    deleted with ours, against the rule that foreign pods are never deleted."""
    owner = ProfileRef(name="fleet", uid="u")
    ours = [pod_facts(with_phase(build(owner, node), "Succeeded")) for node in ("gpu-1", "gpu-2")]
    forged = with_phase(build(ProfileRef("fleet", "someone-else"), "gpu-1", attempt=7), "Failed")
    forged["metadata"]["annotations"]["roofline.dev/profile"] = "not-fleet-at-all"
    look_alike = pod_facts(forged)
    collections, singles = finished_pod_collections("fleet", ours, [*ours, look_alike])
    assert [p.node for p in singles] == ["gpu-1"], "ours on that node goes by name"
    assert not collected_by(collections, forged)
    assert [c.pods for c in collections] == [(ours[1].name,)]


def test_pod_deadline_is_the_profile_timeout() -> None:
    assert build(timeoutSeconds=120)["spec"]["activeDeadlineSeconds"] == 120


def test_pod_names_are_deterministic_short_and_distinct_per_attempt() -> None:
    long_node = "ip-10-0-0-1.eu-west-1.compute.internal.example.with.a.very.long.suffix"
    first = profiler_pod_name("fleet", long_node, "abc", 1)
    assert first == profiler_pod_name("fleet", long_node, "abc", 1)
    assert first != profiler_pod_name("fleet", long_node, "abc", 2)
    assert first != profiler_pod_name("fleet", long_node, "def", 1)
    assert len(first) <= 63
    assert LABEL_VALUE.fullmatch(first)


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


def test_pod_tells_the_profiler_its_node_name_through_the_downward_api() -> None:
    env = {e["name"]: e for e in container(build())["env"]}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}


def test_pod_mounts_the_models_and_passes_the_slo_and_the_price_only_with_models() -> None:
    fields: dict[str, Any] = {"slo": {"interTokenLatency": "50ms"}, "gpuHourCost": "2.5"}
    plain = container(build(**fields))["command"]
    assert "--models-file" not in plain
    assert "--itl-slo" not in plain
    pod = build_profiler_pod(
        profile=OWNER,
        spec=spec(models=[{"name": "m", "preset": "qwen3-8b"}], **fields),
        node="gpu-7",
        gpus=8,
        attempt=1,
        spec_hash="abc123",
        namespace="roofline-system",
        image="registry.local/roofline:1",
        models_config_map="roofline-models-fleet-0123456789",
    )
    command = container(pod)["command"]
    assert command[command.index("--models-file") + 1] == "/etc/roofline/models/models.json"
    assert {"name": "models", "mountPath": "/etc/roofline/models", "readOnly": True} in container(
        pod
    )["volumeMounts"]
    assert {"name": "models", "configMap": {"name": "roofline-models-fleet-0123456789"}} in pod[
        "spec"
    ]["volumes"]
    assert command[command.index("--itl-slo") + 1] == "0.05s"
    assert command[command.index("--gpu-hour-cost") + 1] == "2.5"
    assert command[-2:] == ["--compact", "/dev/termination-log"]


def test_pod_passes_the_workload_and_the_ttft_target_only_with_models() -> None:
    fields: dict[str, Any] = {
        "workload": {"promptTokens": 1000, "outputTokens": 200},
        "slo": {"interTokenLatency": "50ms", "timeToFirstToken": "2s"},
    }
    plain = container(build(**fields))["command"]
    assert "--prompt-tokens" not in plain
    assert "--ttft-slo" not in plain
    pod = build_profiler_pod(
        profile=OWNER,
        spec=spec(models=[{"name": "m", "preset": "qwen3-8b"}], **fields),
        node="gpu-7",
        gpus=8,
        attempt=1,
        spec_hash="abc123",
        namespace="roofline-system",
        image="registry.local/roofline:1",
        models_config_map="roofline-models-fleet-0123456789",
    )
    command = container(pod)["command"]
    assert command[command.index("--prompt-tokens") + 1] == "1000"
    assert command[command.index("--output-tokens") + 1] == "200"
    assert command[command.index("--ttft-slo") + 1] == "2s"
    assert command[command.index("--itl-slo") + 1] == "0.05s"
    assert command[-2:] == ["--compact", "/dev/termination-log"]


def test_pod_pulls_with_the_operators_and_the_profiles_secrets_and_runs_as_the_account() -> None:
    pod = build(
        defaults=PodDefaults(image_pull_secrets=("regcred",), service_account="roofline"),
        imagePullSecrets=[{"name": "team-registry"}, {"name": "regcred"}],
    )
    assert pod["spec"]["imagePullSecrets"] == [{"name": "regcred"}, {"name": "team-registry"}]
    assert pod["spec"]["serviceAccountName"] == "roofline"
    assert pod["spec"]["automountServiceAccountToken"] is False
    own = build(defaults=PodDefaults(service_account="roofline"), serviceAccountName="mine")
    assert own["spec"]["serviceAccountName"] == "mine"


def test_pod_without_secrets_or_classes_names_none() -> None:
    spec = build()["spec"]
    for field in (
        "imagePullSecrets",
        "serviceAccountName",
        "priorityClassName",
        "runtimeClassName",
    ):
        assert field not in spec


def test_pod_carries_the_priority_and_runtime_class_of_the_spec() -> None:
    pod = build(priorityClassName="gpu-profiling", runtimeClassName="nvidia")
    assert pod["spec"]["priorityClassName"] == "gpu-profiling"
    assert pod["spec"]["runtimeClassName"] == "nvidia"


@pytest.mark.parametrize("version", ["1.29", "1.37"])
def test_a_pod_with_every_field_validates_against_the_kubernetes_pod_schema(version: str) -> None:
    pod = build(
        defaults=PodDefaults(image_pull_secrets=("regcred",), service_account="roofline"),
        priorityClassName="gpu-profiling",
        runtimeClassName="nvidia",
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        resources={"requests": {"cpu": "2"}},
    )
    kubernetes_validate.validate(pod, version, strict=True)
