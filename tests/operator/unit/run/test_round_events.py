"""The Events a round posts on its profile: aggregated per round, with the counters they go with."""

from __future__ import annotations

from typing import Any

import kopf
import pytest
from prometheus_client import CollectorRegistry
from tests.operator.unit.operator_builders import profile
from tests.operator.unit.peer_builders import member

from roofline_operator.core.names import FailureReason
from roofline_operator.core.node_results import from_compact
from roofline_operator.decide.hysteresis import MaterialChange, Publication
from roofline_operator.decide.outcomes import Failed, Unschedulable
from roofline_operator.decide.peers import fleet_view
from roofline_operator.decide.round_plan import RoundPlan
from roofline_operator.run.metrics import OperatorMetrics
from roofline_operator.run.round_events import MAX_EVENT_MESSAGE_CHARS, ProfileEvents
from roofline_profiler.wire.warning_codes import HOST_STATE_CODE

Posted = list[tuple[str, str, str]]


@pytest.fixture
def posted(monkeypatch: pytest.MonkeyPatch) -> Posted:
    """``(type, reason, message)`` of every Event, in the order posted."""
    events: Posted = []

    def warn(_: Any, reason: str, message: str) -> None:
        events.append(("Warning", reason, message))

    def event(_: Any, type: str, reason: str, message: str) -> None:
        events.append((type, reason, message))

    monkeypatch.setattr(kopf, "warn", warn)
    monkeypatch.setattr(kopf, "event", event)
    return events


def events_of(profile_name: str = "fleet") -> ProfileEvents:
    metrics = OperatorMetrics(CollectorRegistry())
    metrics.start_profile(profile_name)
    return ProfileEvents({"metadata": {"name": profile_name}}, profile_name, metrics)


def counter(events: ProfileEvents, name: str, **labels: str) -> float | None:
    return events.metrics.registry.get_sample_value(name, {"profile": events.profile, **labels})


def publication(*changes: MaterialChange, held: tuple[str, ...] = ()) -> Publication:
    result = from_compact(profile(), "a")
    return Publication(result=result, moved=bool(changes), changes=changes, held=held)


def test_failures_post_one_warning_per_reason_naming_five_nodes_and_count_each_node(
    posted: Posted,
) -> None:
    events = events_of()
    crashed = Failed(FailureReason.POD_FAILED, "CUDA error: no device")
    failures = [(f"n{i}", crashed) for i in range(7)]
    failures.append(("late", Failed(FailureReason.TIMEOUT, "ran past 600 s")))
    events.announce_failures(failures)
    assert posted == [
        ("Warning", "PodFailed", "7 node(s) failed (n0, n1, n2, n3, n4): CUDA error: no device"),
        ("Warning", "Timeout", "1 node(s) failed (late): ran past 600 s"),
    ]
    assert counter(events, "roofline_profile_failures_total", reason="PodFailed") == 7
    assert counter(events, "roofline_profile_failures_total", reason="Timeout") == 1


def test_a_lost_bandwidth_is_a_warning_and_a_gained_one_is_normal(posted: Posted) -> None:
    events = events_of()
    lost = MaterialChange(gpu=0, quantity="bandwidth", old=4.3e12, new=3.6e12)
    gained = MaterialChange(gpu=0, quantity="bandwidth", old=3.6e12, new=4.3e12)
    events.announce_changes(RoundPlan(records={}, changes=[("a", publication(lost))]))
    events.announce_changes(RoundPlan(records={}, changes=[("a", publication(gained))]))
    assert [(type, reason) for type, reason, _ in posted] == [
        ("Warning", "DeviceChanged"),
        ("Normal", "DeviceChanged"),
    ]
    assert posted[0][2].startswith("node a: bandwidth")
    assert counter(events, "roofline_device_changes_total", quantity="bandwidth") == 2


def test_a_held_back_profile_names_a_host_state_change_when_it_was_one(posted: Posted) -> None:
    events = events_of()
    interference = RoundPlan(records={}, held=[("a", publication(held=("Interference",)))])
    host_state = RoundPlan(records={}, held=[("b", publication(held=(HOST_STATE_CODE,)))])
    events.announce_held(interference)
    events.announce_held(host_state)
    (_, _, first), (_, _, second) = posted
    assert first.startswith("node a: Interference: the profile warned of interference, so")
    assert "changed state" not in first
    assert second.startswith(f"node b: {HOST_STATE_CODE}: the profile warned of interference or")
    assert "clocks and power" in second
    assert counter(events, "roofline_profiles_held_back_total") == 2


def test_unschedulable_nodes_are_one_normal_event_with_the_schedulers_message(
    posted: Posted,
) -> None:
    busy = Unschedulable("0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")
    plan = RoundPlan(records={}, unschedulable=[("a", busy), ("b", busy)])
    events_of().announce_unschedulable(plan)
    assert posted == [
        (
            "Normal",
            "Unschedulable",
            "2 node(s) could not schedule a profiler pod (a, b), tried again later: "
            "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
        )
    ]


def test_a_round_with_nothing_to_tell_posts_no_event(posted: Posted) -> None:
    events_of().announce_round(RoundPlan(records={}), [])
    assert posted == []


def test_a_round_tells_failures_first_and_the_profiled_nodes_last(posted: Posted) -> None:
    plan = RoundPlan(records={}, profiled=[f"n{i}" for i in range(6)])
    events_of().announce_round(plan, [("x", Failed(FailureReason.POD_FAILED, "exit 1"))])
    assert posted == [
        ("Warning", "PodFailed", "1 node(s) failed (x): exit 1"),
        ("Normal", "Profiled", "Profiled 6 node(s): n0, n1, n2, n3, n4 ..."),
    ]


def test_an_event_message_is_cut_to_what_the_api_server_keeps(posted: Posted) -> None:
    long = Failed(FailureReason.POD_FAILED, "x" * 5000)
    events_of().announce_failures([("a", long)])
    ((_, _, message),) = posted
    assert len(message) == MAX_EVENT_MESSAGE_CHARS


def test_nodes_that_fall_behind_their_peers_are_announced_once(posted: Posted) -> None:
    events = events_of()
    found = [member(f"gpu-{i}", 4.3e12) for i in range(4)] + [member("gpu-slow", 3.4e12)]
    view = fleet_view(found, 10)
    announced = events.announce_slower(view, frozenset())
    assert announced == {"gpu-slow"}
    ((kind, reason, message),) = posted
    assert (kind, reason) == ("Warning", "SlowerThanPeers")
    assert message.startswith("node gpu-slow: bandwidth 0.79 of the NVIDIA H200 median (95% 0.78")
    assert "more than 10% below the median of their GPU class" in message
    # The next round with the same view says nothing new.
    assert events.announce_slower(view, announced) == announced
    assert len(posted) == 1
    # A node that recovered and falls behind again is news again.
    recovered = fleet_view([member(f"gpu-{i}", 4.3e12) for i in range(5)], 10)
    assert events.announce_slower(recovered, announced) == frozenset()
    events.announce_slower(view, frozenset())
    assert len(posted) == 2
