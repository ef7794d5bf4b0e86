"""llm-d's autoscaler ConfigMap: the default entry and one per model."""

from __future__ import annotations

import yaml

from roofline_cli.export import thresholds, wva
from roofline_cli.export.commented import plain
from roofline_cli.export.from_status import source_of_profile
from roofline_cli.export.options import WVA_CONFIGMAP, ExportOptions
from tests.cli.export_sources import MODEL, status_profile


def test_the_configmap_holds_the_default_and_the_models_entry() -> None:
    source = source_of_profile(status_profile(), "p")
    ((_, document),) = wva.build(source, ExportOptions(namespace="llm", model_id="meta/llama"))
    config_map = plain(document)
    assert config_map["metadata"] == {
        "name": WVA_CONFIGMAP,
        "namespace": "workload-variant-autoscaler-system",
    }
    default = yaml.safe_load(config_map["data"]["default"])
    assert default == {
        "kvCacheThreshold": thresholds.WVA_DEFAULT_KV_THRESHOLD,
        "queueLengthThreshold": 5,
        "kvSpareTrigger": 0.1,
        "queueSpareTrigger": 3,
    }
    entry = yaml.safe_load(config_map["data"][wva.entry_key(MODEL)])
    assert entry == {
        "model_id": "meta/llama",
        "namespace": "llm",
        "kvCacheThreshold": 0.6,
        "queueLengthThreshold": 3,
        "kvSpareTrigger": 0.07,
        "queueSpareTrigger": 2,
    }
    # llm-d drops an entry whose KV threshold is below its spare trigger.
    assert entry["kvCacheThreshold"] >= entry["kvSpareTrigger"]
