"""What a result says about a change of host state within a profile.

When the host gave a device two states (``host_state_detection``), every number of the result
comes from one of them; :class:`HostStateReport` is the part of the result document that says
which, the rounds of each state, the levels of the workloads that showed the change and the
headline numbers the other state gives (``sanity.host_state_warning`` words it for people).

Pure module: no torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from roofline_profiler.wire import fields

#: The two states of a host: its faster and its slower one.
FAST, SLOW = "fast", "slow"
STATES = (FAST, SLOW)


@dataclass(frozen=True)
class Levels:
    """One workload's two levels: the confirmed rate (work/s) of each group and its rounds."""

    label: str
    fast: float
    slow: float
    fast_rounds: tuple[int, ...]
    slow_rounds: tuple[int, ...]


@dataclass(frozen=True)
class Headline(fields.HeadlineNumbers):
    """The headline numbers of a device in one state, without intervals."""

    numbers: fields.Numbers

    def to_dict(self) -> dict[str, Any]:
        return {f.key: f.value_of(self) for f in fields.DEVICE_HEADLINE}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Headline:
        return cls({f.attribute: fields.Estimate(d[f.key]) for f in fields.DEVICE_HEADLINE})


@dataclass(frozen=True)
class HostStateReport:
    """What a result says about a state change: the rounds of each state, the levels of the
    workloads that showed it, the state the numbers come from and the other state's numbers."""

    state: str
    fast_rounds: tuple[int, ...]
    slow_rounds: tuple[int, ...]
    levels: tuple[Levels, ...]
    missing: tuple[str, ...]
    #: The headline numbers the other state's rounds give.
    other: Headline

    @property
    def complete(self) -> bool:
        return not self.missing

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "complete": self.complete,
            "fastRounds": list(self.fast_rounds),
            "slowRounds": list(self.slow_rounds),
            "levels": [
                {
                    "label": lv.label,
                    "fastRatePerSecond": lv.fast,
                    "slowRatePerSecond": lv.slow,
                    "fastRounds": list(lv.fast_rounds),
                    "slowRounds": list(lv.slow_rounds),
                }
                for lv in self.levels
            ],
            "missing": list(self.missing),
            "other": self.other.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HostStateReport:
        return cls(
            state=d["state"],
            fast_rounds=tuple(d["fastRounds"]),
            slow_rounds=tuple(d["slowRounds"]),
            levels=tuple(
                Levels(
                    lv["label"],
                    lv["fastRatePerSecond"],
                    lv["slowRatePerSecond"],
                    tuple(lv["fastRounds"]),
                    tuple(lv["slowRounds"]),
                )
                for lv in d["levels"]
            ),
            missing=tuple(d["missing"]),
            other=Headline.from_dict(d["other"]),
        )
