"""The node and pod caches: events and the priming list race, and the events win."""

from __future__ import annotations

import pytest

from roofline_operator.core.cache import ObjectCache


def primed(cache: ObjectCache[str, int], listed: dict[str, int]) -> ObjectCache[str, int]:
    cache.finish_priming(listed.items())
    return cache


def priming() -> ObjectCache[str, int]:
    cache: ObjectCache[str, int] = ObjectCache()
    cache.start_priming()
    return cache


def test_a_cache_is_not_ready_until_its_priming_list_is_merged() -> None:
    cache = priming()
    cache.upsert("a", 1)
    assert not cache.ready.is_set()
    primed(cache, {"a": 1, "b": 2})
    assert cache.ready.is_set()
    assert cache.snapshot() == {"a": 1, "b": 2}


def test_a_deletion_seen_while_priming_is_not_resurrected_by_the_list() -> None:
    cache = priming()
    cache.delete("a")
    primed(cache, {"a": 1, "b": 2})
    assert "a" not in cache
    assert cache.snapshot() == {"b": 2}


def test_an_update_seen_while_priming_wins_over_the_listed_state() -> None:
    cache = priming()
    cache.upsert("a", 7)
    primed(cache, {"a": 1})
    assert cache.get("a") == 7


def test_an_object_created_while_priming_but_missing_from_the_list_is_kept() -> None:
    cache = priming()
    cache.upsert("new", 3)
    primed(cache, {"a": 1})
    assert cache.snapshot() == {"a": 1, "new": 3}


def test_objects_seen_before_priming_but_missing_from_the_list_are_dropped() -> None:
    cache: ObjectCache[str, int] = ObjectCache()
    cache.upsert("gone", 1)
    cache.upsert("a", 0)
    cache.start_priming()
    primed(cache, {"a": 1})
    assert cache.snapshot() == {"a": 1}, "the list is newer than events before it started"


def test_events_after_priming_apply_directly_and_leave_no_tombstones() -> None:
    cache = primed(priming(), {"a": 1})
    cache.delete("a")
    cache.upsert("b", 2)
    assert cache.snapshot() == {"b": 2}


def test_a_failed_priming_can_start_again_and_forgets_older_marks() -> None:
    cache = priming()
    cache.upsert("a", 5)  # seen while the first, failed, list ran
    cache.start_priming()  # the retry's list is newer than that event
    primed(cache, {"a": 6})
    assert cache.get("a") == 6


def test_finishing_a_priming_that_never_started_is_a_bug() -> None:
    with pytest.raises(RuntimeError):
        ObjectCache[str, int]().finish_priming([])


def test_a_snapshot_does_not_change_with_later_events() -> None:
    cache = primed(priming(), {"a": 1})
    view = cache.snapshot()
    cache.upsert("b", 2)
    assert view == {"a": 1}
    assert len(cache) == 2


def test_a_relist_drops_objects_whose_deletion_the_watch_missed_and_stays_ready() -> None:
    cache = primed(priming(), {"a": 1, "b": 2})
    cache.start_priming()
    assert cache.ready.is_set(), "readers keep the cache while it is listed again"
    primed(cache, {"a": 1})
    assert cache.snapshot() == {"a": 1}
    assert cache.ready.is_set()


def test_events_seen_during_a_relist_win_over_its_list() -> None:
    cache = primed(priming(), {"a": 1, "b": 2})
    cache.start_priming()
    cache.delete("a")  # deleted while the relist ran: its list may still hold it
    cache.upsert("c", 3)  # created after the list's snapshot: the list lacks it
    cache.upsert("b", 5)  # updated after the snapshot
    primed(cache, {"a": 1, "b": 2})
    assert cache.snapshot() == {"b": 5, "c": 3}
