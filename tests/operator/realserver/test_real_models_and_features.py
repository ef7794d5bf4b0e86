"""Model plans and the NodeFeature label backend on a real API server, with the chart's RBAC.

The NodeFeature CRD is node-feature-discovery's own, from the pinned NFD module
(``scripts/control-plane.sh``); nfd-master is not running, so the NodeFeature objects are what the
tests read, as nfd-master would.
"""

from __future__ import annotations

import json
from typing import Any

from tests.model_configs import TINY_LLAMA
from tests.operator.harness import Kubectl, wait_for
from tests.operator.harness.profiles import (
    condition,
    example_profile,
    node_entries,
    profile_status,
    profiled,
    wait_for_nodes,
)
from tests.operator.harness.realcluster import RealCluster
from tests.operator.harness.realsuite import (
    NFD_NAMESPACE,
    PROFILER_NAMESPACE,
    RealOperators,
    labels_of,
)
from tests.operator.harness.releases import Release

from roofline_operator.decide.labels import label_safe

NFD_GROUP = "nfd.k8s-sigs.io"


def planned(names: list[str]) -> Any:
    def check(entry: dict[str, Any]) -> bool:
        done = {m["name"] for m in entry.get("models", []) if "maxBatchByMemory" in m}
        return profiled(entry) and done == set(names)

    return check


def test_a_model_plan_from_an_inline_config_and_a_config_map_reaches_status(
    real_cluster: RealCluster,
    node_release: Release,
    real_operators: RealOperators,
    kubectl: Kubectl,
) -> None:
    real_cluster.add_gpu_node("real-model", gpus=2)
    real_cluster.create(
        "configmaps",
        {"metadata": {"name": "mapped-config"}, "data": {"config.json": json.dumps(TINY_LLAMA)}},
        namespace=PROFILER_NAMESPACE,
    )
    models = [
        {"name": "tiny", "config": TINY_LLAMA, "contextTokens": 2048},
        {"name": "mapped", "configMapRef": {"name": "mapped-config"}},
    ]
    spec = {"models": models, "slo": {"interTokenLatency": "50ms"}}
    operator = real_operators.start(node_release)
    real_cluster.create(
        "rooflineprofiles", example_profile("real-models", **spec), group="roofline.dev"
    )
    wait_for_nodes(
        real_cluster, "real-models", planned(["tiny", "mapped"]), ["real-model"], timeout=90
    )
    status = profile_status(real_cluster, "real-models")
    assert condition(status, "ModelsReady")["status"] == "True"
    entry = {
        m["name"]: m for m in node_entries(real_cluster, "real-models")["real-model"]["models"]
    }
    assert entry["tiny"]["maxBatch"] == min(
        entry["tiny"]["maxBatchByMemory"], entry["tiny"]["maxBatchByLatency"]
    )
    assert entry["mapped"]["maxBatchByMemory"] > 0, "the ConfigMap's config was read and planned"
    series = {
        labels["model"]
        for labels, _ in operator.samples("roofline_model_max_batch")
        if labels.get("profile") == "real-models"
    }
    assert series == {"tiny", "mapped"}
    shown = kubectl("get", "rp", "real-models", "-o", "wide").stdout
    assert "real-models" in shown


def test_the_models_config_map_replaced_by_a_mutable_look_alike_fails_the_models_alone(
    real_cluster: RealCluster,
    node_release: Release,
    real_operators: RealOperators,
) -> None:
    """The operator's own immutable models ConfigMap, deleted and created again under its name
    as a mutable look-alike with the profile's owner reference and the same models (all that
    a ConfigMap writer can read or derive): the next rounds fail the models alone with the
    reason, never delete it, and once it is gone the operator creates its own again."""
    real_cluster.add_gpu_node("real-cm-swap")
    spec = {"models": [{"name": "tiny", "config": TINY_LLAMA}]}
    real_operators.start(node_release)
    real_cluster.create(
        "rooflineprofiles", example_profile("real-cm-swap", **spec), group="roofline.dev"
    )
    wait_for_nodes(real_cluster, "real-cm-swap", planned(["tiny"]), ["real-cm-swap"], timeout=90)

    def models_config_maps() -> list[dict[str, Any]]:
        found = real_cluster.list("configmaps", PROFILER_NAMESPACE)
        return [c for c in found if c["metadata"]["name"].startswith("roofline-models-real-cm")]

    (own,) = models_config_maps()
    assert own["immutable"] is True
    name = own["metadata"]["name"]
    real_cluster.delete("configmaps", name, PROFILER_NAMESPACE)
    look_alike = {
        "metadata": {
            "name": name,
            "labels": own["metadata"]["labels"],
            "ownerReferences": own["metadata"]["ownerReferences"],
        },
        "data": own["data"],
    }
    real_cluster.create("configmaps", look_alike, PROFILER_NAMESPACE)

    def models_ready() -> dict[str, Any]:
        return condition(profile_status(real_cluster, "real-cm-swap"), "ModelsReady")

    refused = wait_for(
        lambda: (c := models_ready()).get("reason") == "ModelsConfigMapConflict" and c,
        timeout=30,
        what="the look-alike to fail the models",
    )
    assert "it is mutable" in refused["message"]
    assert refused["status"] == "False"
    (still,) = models_config_maps()
    assert still["metadata"]["uid"] != own["metadata"]["uid"], "the look-alike is not deleted"

    real_cluster.delete("configmaps", name, PROFILER_NAMESPACE)
    recreated = wait_for(
        lambda: [c for c in models_config_maps() if c.get("immutable") is True],
        timeout=30,
        what="the operator to create its own models ConfigMap again",
    )
    assert recreated[0]["metadata"]["name"] == name
    wait_for(
        lambda: models_ready().get("status") == "True",
        timeout=60,
        what="the models to be ready again",
    )


def test_the_node_feature_backend_writes_one_node_feature_per_node_and_deletes_them(
    real_cluster: RealCluster,
    nfd_release: Release,
    real_operators: RealOperators,
    kubectl: Kubectl,
) -> None:
    nodes = ["real-nfd-a", "real-nfd-b"]
    for node in nodes:
        real_cluster.add_gpu_node(node)
    assert nfd_release.env["ROOFLINE_NODE_LABEL_BACKEND"] == "nodeFeature"
    real_operators.start(nfd_release)
    real_cluster.create("rooflineprofiles", example_profile("real-nfd"), group="roofline.dev")
    entries = wait_for_nodes(real_cluster, "real-nfd", profiled, nodes, timeout=60)

    def features() -> dict[str, dict[str, Any]]:
        found = real_cluster.list("nodefeatures", NFD_NAMESPACE, group=NFD_GROUP)
        return {f["metadata"]["labels"]["nfd.node.kubernetes.io/node-name"]: f for f in found}

    written = wait_for(
        lambda: features() if set(features()) == set(nodes) else None,
        timeout=30,
        what="one NodeFeature per node",
    )
    for node in nodes:
        labels = written[node]["spec"]["labels"]
        assert labels["roofline.dev/profile"] == "real-nfd"
        assert int(labels["roofline.dev/min-batch"]) == entries[node]["recommendedMinBatch"]
        assert labels["roofline.dev/class"] == label_safe(entries[node]["product"])
        assert labels["roofline.dev/device"] == entries[node]["device"]
        assert not any(k.startswith("roofline.dev/") for k in labels_of(real_cluster, node)), (
            "the nodeFeature backend never writes nodes"
        )
    listed = kubectl("get", "nodefeatures", "-n", NFD_NAMESPACE).stdout
    assert all(written[node]["metadata"]["name"] in listed for node in nodes)

    kubectl("delete", "rooflineprofile", "real-nfd", "--wait=true", "--timeout=60s")
    assert features() == {}, "deleting the profile deletes its NodeFeatures"


def test_a_node_feature_loses_the_labels_its_profile_stops_owning(
    real_cluster: RealCluster,
    nfd_release: Release,
    real_operators: RealOperators,
) -> None:
    """The stored ``spec.labels`` equal the intended set: with ``labelNodes: false`` none of
    ours, while the object stays for the node's record. A merge patch of the smaller set had
    removed nothing, so nfd-master kept every ``roofline.dev/*`` label on the node."""
    real_cluster.add_gpu_node("real-nfd-unlabel")
    real_operators.start(nfd_release)
    real_cluster.create(
        "rooflineprofiles", example_profile("real-nfd-unlabel"), group="roofline.dev"
    )
    wait_for_nodes(real_cluster, "real-nfd-unlabel", profiled, ["real-nfd-unlabel"], timeout=60)

    def stored() -> dict[str, Any] | None:
        found = real_cluster.list("nodefeatures", NFD_NAMESPACE, group=NFD_GROUP)
        mine = [
            f
            for f in found
            if f["metadata"]["labels"]["roofline.dev/profile"] == "real-nfd-unlabel"
        ]
        return mine[0] if mine else None

    labelled = wait_for(
        lambda: (f := stored()) and f["spec"]["labels"] and f, timeout=30, what="labels written"
    )
    assert labelled["spec"]["labels"]["roofline.dev/profile"] == "real-nfd-unlabel"
    real_cluster.patch(
        "rooflineprofiles",
        "real-nfd-unlabel",
        {"spec": {"labelNodes": False}},
        group="roofline.dev",
    )
    unlabelled = wait_for(
        lambda: (f := stored()) and f["spec"].get("labels") == {} and f,
        timeout=30,
        what="a NodeFeature without our labels",
    )
    key = "record.roofline.dev/real-nfd-unlabel"
    assert key in unlabelled["metadata"]["annotations"], "the record stays"
