"""What a node publishes after a new profile: hysteresis on every headline number, and the
material changes worth an Event.

Node labels, the status headline numbers and the gauges are keys for Kueue flavors, affinities and
alerts; a value that flips with measurement noise makes all of them flap. So each published number
(bandwidth, peak, ridge point and recommended min batch, per GPU) moves to a new profile's value
only when the two differ by more than their combined uncertainty:

    |new - old| > sqrt(a² + b²)

where ``a`` is the published value's 95% half-width on the side facing the new value and ``b`` the
new value's half-width on the side facing the old one (the usual combination of two independent
uncertainties, taken per side because bootstrap intervals are not symmetric). Otherwise the
published number stays, and its interval is re-derived from the latest measurement: the new
profile's half-widths around the held value. A held number thus never keeps an interval older
than the latest profile, so one wide interval cannot pin a wrong value: the next tight profile
that disagrees moves it. A number without an interval (a version 1 compact result, a status
written before intervals) counts as exact: any change publishes, as before hysteresis.

A published bandwidth, peak or ridge point whose interval reaches further than
``node_results.PROVISIONAL_HALF_WIDTH`` (10%) of its value on either side is *provisional*
(``node_results.provisional_quantities``; the status says so): the first profile whose interval
is within that bound replaces it, whether or not the two differ beyond noise, and that counts as
no change.

A change is *material* when a number moved (beyond noise, as above) by more than the profile's
``changeThresholdPercent`` (default 10%) of its published value, for bandwidth, peak or ridge
point: a degrading GPU is news, noise is not.

A profile that itself warns of interference (``warning_codes.INTERFERENCE_CODES``:
``CpuContention``, ``InterferenceUnresolved``) is *held back*: its numbers may sit lower than the
device by more than their intervals say, so every published number stays and nothing counts as a
change. Only the first such profile in a row is held: interference that is still there at the
next profile (hours later, on the re-profile schedule) is the node's condition, and that profile
publishes as usual.

A profile that says the host changed state while it ran (``warning_codes.HOST_STATE_CODE``,
``HostStateChanged``: a GPU that throttles, a neighbour that comes and goes) took its numbers from
one of two states, and the next profile may find the other. It is held back unless the profile
before it measured the same level (:func:`level_persists`): a level that persists across two
profiles publishes, with a ``DeviceChanged`` Event when it moved materially, so a node that really
throttles is news; a node that flaps between levels keeps its published numbers and labels.

Pure module: no Kubernetes, no Kopf.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from roofline_operator.core.node_results import (
    GpuResult,
    Headline,
    NodeResult,
    headline_of,
    is_wide,
)
from roofline_operator.core.spec import DEFAULT_CHANGE_THRESHOLD_PERCENT
from roofline_operator.decide.records import NodeRecord
from roofline_profiler.wire import fields
from roofline_profiler.wire.fields import Estimate, HeadlineField
from roofline_profiler.wire.warning_codes import HOST_STATE_CODE, INTERFERENCE_CODES, STATE_GAP

#: The quantities a material change can name, in the order messages list them.
MATERIAL_QUANTITIES = ("bandwidth", "peak", "ridge point")


def _side_half_width(value: float, interval: tuple[float, float] | None, upward: bool) -> float:
    """The half-width of ``interval`` on the side of ``value`` that faces the other value."""
    if interval is None:
        return 0.0
    width = interval[1] - value if upward else value - interval[0]
    return max(width, 0.0)


def beyond_noise(
    old: float,
    old_interval: tuple[float, float] | None,
    new: float,
    new_interval: tuple[float, float] | None,
) -> bool:
    """Whether ``new`` differs from ``old`` by more than their combined uncertainty."""
    if new == old:
        return False
    upward = new > old
    a = _side_half_width(old, old_interval, upward)
    b = _side_half_width(new, new_interval, not upward)
    return abs(new - old) > math.hypot(a, b)


@dataclass(frozen=True)
class MaterialChange:
    """A published number that moved by more than the threshold."""

    gpu: int
    quantity: str
    old: float
    new: float

    @property
    def relative(self) -> float:
        return (self.new - self.old) / self.old

    def describe(self) -> str:
        """``bandwidth 4.31→3.62 TB/s (−16%)``."""
        scale, unit = _display_unit(self.quantity, max(self.old, self.new))
        percent = f"{self.relative * 100:+.0f}%".replace("-", "\u2212")
        old, new = _three_digits(self.old / scale), _three_digits(self.new / scale)
        return f"{self.quantity} {old}\u2192{new} {unit} ({percent})"


def _display_unit(quantity: str, value: float) -> tuple[float, str]:
    if quantity == "ridge point":
        return 1.0, "FLOP/B"
    base = "B/s" if quantity == "bandwidth" else "FLOP/s"
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M")):
        if value >= scale:
            return scale, prefix + base
    return 1.0, base


def _three_digits(value: float) -> str:
    return f"{value:.3g}" if value < 1000 else f"{value:.0f}"


def describe_changes(changes: tuple[MaterialChange, ...], gpus: int) -> str:
    """One line naming each changed number, prefixed by its GPU on a node with several."""
    parts = []
    for change in changes:
        prefix = f"GPU {change.gpu} " if gpus > 1 else ""
        parts.append(prefix + change.describe())
    return ", ".join(parts)


@dataclass(frozen=True)
class Publication:
    """What a node publishes after a new profile."""

    #: The measured result with every headline number that stayed within noise replaced by the
    #: published one (and its interval); everything else (times, step times) is the new profile's.
    result: NodeResult
    #: Whether any published headline number took the new profile's value.
    moved: bool
    changes: tuple[MaterialChange, ...]
    #: The interference warnings that held the new profile back (every number kept); empty
    #: when it was not held.
    held: tuple[str, ...] = ()

    def describe(self) -> str:
        return describe_changes(self.changes, len(self.result.gpus))


def comparable(published: NodeResult, measured: NodeResult) -> bool:
    """Whether two results measured the same thing: the same dtype and weight shape."""
    return (published.dtype, published.shape_k, published.shape_n) == (
        measured.dtype,
        measured.shape_k,
        measured.shape_n,
    )


def _number(f: HeadlineField, gpu: GpuResult) -> Estimate:
    """The headline number ``f`` of ``gpu`` and its interval, as floats for comparing."""
    number = f.estimate_of(gpu)
    interval = number.interval
    if interval is not None:
        interval = (float(interval[0]), float(interval[1]))
    return Estimate(float(number.value), interval)


def publish_gpu(
    published: GpuResult, measured: GpuResult, threshold_percent: float, hold: bool = False
) -> tuple[GpuResult, bool, tuple[MaterialChange, ...]]:
    """The GPU to publish: ``measured``, with each number that stayed within noise (and its
    interval) kept from ``published`` (every number when ``hold``); whether any number moved;
    the material changes."""
    result = measured
    moved = False
    changes = []
    for number in fields.DEVICE_HEADLINE:
        before, after = _number(number, published), _number(number, measured)
        old, old_interval = before.value, before.interval
        new, new_interval = after.value, after.interval
        provisional = (
            number.quantity in MATERIAL_QUANTITIES
            and is_wide(old, old_interval)
            and new_interval is not None
            and not is_wide(new, new_interval)
        )
        # A held-back profile moves nothing.
        if not hold and provisional:
            moved = True  # a tight profile replaces a provisional number: no change to report
            continue
        if not hold and beyond_noise(old, old_interval, new, new_interval):
            moved = True
            material = number.quantity in MATERIAL_QUANTITIES and old > 0
            if material and abs(new - old) / old * 100 > threshold_percent:
                changes.append(MaterialChange(measured.index, number.quantity, old, new))
            continue
        source = published if hold else measured
        held = _held(result, published, source, number)
        result = replace(result, numbers={**result.numbers, number.attribute: held})
    return result, moved, tuple(changes)


def _held(
    result: GpuResult, published: GpuResult, source: GpuResult, number: HeadlineField
) -> Estimate:
    """``number`` held at its published value, its interval (when ``result`` has intervals)
    around it with the half-widths of ``source``: the latest measurement when noise held the
    number, the published one when interference held the whole profile back. Without a
    ``source`` interval the held number is exact."""
    held: Any = number.value_of(published)
    if number.estimate_of(result).interval is None:
        return Estimate(held)
    from_source = _number(number, source)
    value, widths = from_source.value, from_source.interval
    if widths is None:
        return Estimate(held, (held, held))
    below, above = max(value - widths[0], 0.0), max(widths[1] - value, 0.0)
    if isinstance(held, int):
        return Estimate(held, (max(held - math.ceil(below), 0), held + math.ceil(above)))
    return Estimate(held, (max(held - below, 0.0), held + above))


def publish(
    published: NodeResult | None,
    measured: NodeResult,
    threshold_percent: float = DEFAULT_CHANGE_THRESHOLD_PERCENT,
    hold: tuple[str, ...] = (),
) -> Publication:
    """What to publish after ``measured``, given what is ``published`` now (if anything); with
    ``hold`` (the interference warnings of a held-back profile) every published number stays.

    A GPU is compared with the published GPU of the same index and product; a node profiled for
    the first time, under another dtype or weight shape, or a GPU not published before, publishes
    the new numbers as they are, and none of that counts as a material change.
    """
    if published is None or not comparable(published, measured):
        return Publication(measured, True, ())  # nothing to hold on to
    before = {(g.index, g.product): g for g in published.gpus}
    gpus = []
    moved = len(before) != len(measured.gpus)
    changes: list[MaterialChange] = []
    for gpu in measured.gpus:
        old = before.get((gpu.index, gpu.product))
        if old is None:
            gpus.append(gpu)
            moved = True
            continue
        kept, gpu_moved, gpu_changes = publish_gpu(old, gpu, threshold_percent, bool(hold))
        gpus.append(kept)
        moved = moved or gpu_moved
        changes.extend(gpu_changes)
    return Publication(replace(measured, gpus=tuple(gpus)), moved, tuple(changes), hold)


def level_persists(previous: Headline | None, latest: Headline) -> bool:
    """Whether ``latest`` found the level the profile before it measured: bandwidth, peak and
    ridge point each within ``warning_codes.STATE_GAP`` of the previous profile's (two states of a
    host lie at least that far apart, so two profiles within it saw the same one)."""
    if previous is None:
        return False
    pairs = (
        (f.value_of(previous), f.value_of(latest))
        for f in fields.DEVICE_HEADLINE
        if f.quantity in MATERIAL_QUANTITIES
    )
    return all(old > 0 and abs(new - old) <= STATE_GAP * old for old, new in pairs)


def record_profile(
    record: NodeRecord, measured: NodeResult, threshold_percent: float
) -> tuple[NodeRecord, Publication]:
    """``record`` after a successful profile: the published result (held within noise, or held
    back for interference), the new measured and previous numbers, when the published ones last
    moved, the material change and the profile's warnings."""
    codes = measured.warnings()
    interference = tuple(c for c in codes if c in INTERFERENCE_CODES)
    in_a_row = any(c in INTERFERENCE_CODES for c in record.warnings)
    hold = () if in_a_row else interference
    if HOST_STATE_CODE in codes and not level_persists(record.measured, headline_of(measured)):
        hold = (HOST_STATE_CODE, *interference)
    publication = publish(record.result, measured, threshold_percent, hold)
    published_at = record.published_at
    if publication.moved or published_at is None:
        published_at = measured.profiled_at
    previous = record.measured
    if previous is None and record.result is not None:
        previous = headline_of(record.result)
    updated = replace(
        record,
        result=publication.result,
        measured=headline_of(measured),
        previous=previous,
        published_at=published_at,
        change=publication.describe() or None,
        warnings=codes,
        held=bool(publication.held),
    )
    return updated, publication
