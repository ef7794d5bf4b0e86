import logging

from prometheus_client import CollectorRegistry

from roofline_operator.run.apply import LABEL_PATCH_MEMORY_SECONDS, NodePatch, PlanApplier
from roofline_operator.run.metrics import OperatorMetrics

PATCH: NodePatch = ({"roofline.dev/min-batch": "64"}, {"record.roofline.dev/p": "{}"})


def _applier() -> PlanApplier:
    return PlanApplier("p", OperatorMetrics(CollectorRegistry()), logging.getLogger("test"))


def test_a_patch_is_not_sent_again_while_the_watch_shows_no_newer_node() -> None:
    applier = _applier()
    assert applier.skip_repeated_node_patches({"n1": PATCH}, 0.0, {"n1": "7"}) == {"n1": PATCH}
    # A watch lagging far behind (a large cluster) still shows version 7: nothing to send.
    assert applier.skip_repeated_node_patches({"n1": PATCH}, 120.0, {"n1": "7"}) == {}


def test_a_newer_node_that_still_needs_the_patch_gets_it_again() -> None:
    applier = _applier()
    applier.skip_repeated_node_patches({"n1": PATCH}, 0.0, {"n1": "7"})
    # Version 9 arrived without our labels (someone removed them): the patch goes out again.
    assert applier.skip_repeated_node_patches({"n1": PATCH}, 1.0, {"n1": "9"}) == {"n1": PATCH}


def test_a_different_patch_for_the_same_node_is_sent_at_once() -> None:
    applier = _applier()
    applier.skip_repeated_node_patches({"n1": PATCH}, 0.0, {"n1": "7"})
    other: NodePatch = ({"roofline.dev/min-batch": "128"}, {})
    assert applier.skip_repeated_node_patches({"n1": other}, 1.0, {"n1": "7"}) == {"n1": other}


def test_a_lost_watch_event_is_outlived_by_the_memorys_limit() -> None:
    applier = _applier()
    applier.skip_repeated_node_patches({"n1": PATCH}, 0.0, {"n1": "7"})
    later = LABEL_PATCH_MEMORY_SECONDS + 1.0
    assert applier.skip_repeated_node_patches({"n1": PATCH}, later, {"n1": "7"}) == {"n1": PATCH}
