"""Time the parts of a model's decode step, batch by batch, in interleaved passes.

Each part (a layer body, the head, attention) is timed at every batch. Timing one batch after the
other would let a burst of interference from another process land on one batch and, multiplied
by the layer count, bend the predicted curve there. So the batches are timed in
round-robin passes (:attr:`PassPolicy.passes`) and each batch's samples from all passes form its
measurement (the same defence as the reference bench's interleaved rounds): a burst then costs
every batch a little instead of one batch a lot. A part's time is the typical run of its quieter
passes (``Measurement.quiet_median``). With two passes of 0.15 s and the median of every sample,
the steps at two batches of a model came out 14-34% slow on a busy 2-vCPU VM while their fastest
runs matched the engine's: a burst as long as a pass moved half a batch's samples. A profile now
takes five shorter passes, and up to three can be disturbed without moving the estimate.

Within a pass a fast part is timed adaptively (``timing.measure``: a warm-up call, then runs until
the pass's time slice is spent). A part whose first run takes :data:`SLOW_RUN_SECONDS` or
more (a large model's layer on a CPU, a compute-bound batch) is timed one run per pass
(``--quick``: one run in all), which keeps an 8B model's largest batches within a profile's time
budget. Its first run stays a warm-up all the same: a long run still pays one-time costs.

On a CPU, each part's time in each pass also records the share its threads waited for a CPU
another process held (``timing.cpu_wait_seconds``), as the roofline's rounds do: a pass is a round
of the part's measurement, so a plan can say when no quiet pass set a predicted step time.

On a CUDA (or ROCm) device a part is timed as a CUDA graph, the way the engines run a decode step
(vLLM, SGLang and TGI replay captured graphs by default): launched one kernel at a time from
Python, an 8B model's layer on an H200 took ten times what its kernels take, and the plan
predicted the host's launch rate instead of the GPU. One graph holds :attr:`Part.period`
consecutive runs, so it still rotates through the part's weight copies, routings and KV slices;
a replay's time is divided among its runs. A part whose capture fails (an operation that waits
for the host) is timed eagerly and the plan says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from roofline_profiler.core.stats import Measurement
from roofline_profiler.measure.timing import WaitClock, measure, synchronize

#: A part whose first run takes this long is timed once per pass (once in all with --quick).
SLOW_RUN_SECONDS = 0.1


@dataclass(frozen=True)
class PassPolicy:
    """Round-robin passes over the batches; per pass and batch, cheap runs repeated within a
    small time slice."""

    passes: int
    seconds: float
    min_runs: int


QUICK_PASS = PassPolicy(passes=2, seconds=0.04, min_runs=2)
DEFAULT_PASS = PassPolicy(passes=5, seconds=0.06, min_runs=2)


@dataclass(frozen=True)
class Part:
    """One part at one batch: ``run(i)`` does run ``i`` (rotating its inputs by ``i``)."""

    batch: int
    label: str
    run: Callable[[int], object]
    #: Runs after which ``run`` repeats its inputs (weight copies, routings, KV slices): one
    #: CUDA graph holds this many runs in a row.
    period: int = 1


@dataclass(frozen=True)
class Graphed:
    """``runs`` consecutive runs of a part captured as one CUDA graph; ``run`` replays them."""

    run: Callable[[int], object]
    runs: int


def capture_graph(part: Part, device: torch.device) -> Graphed:
    """Capture :attr:`Part.period` consecutive runs of ``part`` as one CUDA graph.

    The same runs go once through a side stream first, outside the capture: lazy initialisation
    and library workspaces must not happen while capturing. Raises what the capture raises.
    """
    runs = max(1, part.period)
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for i in range(runs):
            part.run(i)
    torch.cuda.current_stream(device).wait_stream(side)
    torch.cuda.synchronize(device)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(runs):
            part.run(i)
    return Graphed(run=lambda _: graph.replay(), runs=runs)


def _graphs_on(device: torch.device) -> bool:
    return device.type == "cuda"


def _once(run: Callable[[int], object], index: int, device: torch.device) -> float:
    synchronize(device)
    start = time.perf_counter()
    run(index)
    synchronize(device)
    return time.perf_counter() - start


@dataclass
class _Timed:
    """What one part gathered so far: samples with their pass, and each pass's CPU wait share."""

    part: Part
    times: list[float] = field(default_factory=list)
    passes: list[int] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)
    warmup_runs: int = 0
    slow: bool = False
    next_index: int = 1
    graphed: Graphed | None = None
    #: Why the part could not be captured as a CUDA graph (then it is timed eagerly).
    eager_reason: str = ""

    @property
    def run(self) -> Callable[[int], object]:
        return self.graphed.run if self.graphed else self.part.run

    @property
    def runs_per_call(self) -> int:
        return self.graphed.runs if self.graphed else 1

    def measurement(self) -> Measurement:
        complete = len(self.waits) == len(set(self.passes))
        return Measurement(
            label=self.part.label,
            times=tuple(self.times),
            warmup_runs=self.warmup_runs,
            rounds=tuple(self.passes),
            cpu_waits=tuple(self.waits) if complete else (),
        )


def _capture(t: _Timed, device: torch.device) -> None:
    try:
        t.graphed = capture_graph(t.part, device)
    except (RuntimeError, NotImplementedError) as error:  # torch.OutOfMemoryError included
        synchronize(device)
        t.eager_reason = (str(error).strip().splitlines() or [type(error).__name__])[0][:160]
        return
    t.warmup_runs += 2 * t.graphed.runs  # the side-stream runs and the captured ones


def _pass(t: _Timed, number: int, policy: PassPolicy, device: torch.device) -> list[float]:
    """The samples of one part's pass (per run: a graph's replay time over its runs)."""
    per = t.runs_per_call
    if number == 0:
        if _graphs_on(device):
            _capture(t, device)
            per = t.runs_per_call
        # The first call is a warm-up even when it is long: on a CPU, the first run of an 8B
        # model's layer at batch 1 took about twice as long as its later runs.
        t.slow = _once(t.run, 0, device) / per >= SLOW_RUN_SECONDS
        t.warmup_runs += per
    if t.slow:
        t.next_index += 1
        return [_once(t.run, t.next_index - 1, device) / per]
    m = measure(
        t.run,
        label=t.part.label,
        work=0.0,
        device=device,
        seconds=policy.seconds,
        min_runs=policy.min_runs,
    )
    t.warmup_runs += m.warmup_runs * per
    return [seconds / per for seconds in m.times]


def eager_note(timed: Sequence[tuple[str, str]], total: int) -> str:
    """The plan's note on parts timed eagerly on a GPU: ``timed`` holds (label, reason) pairs."""
    labels = ", ".join(label for label, _ in timed[:3]) + (", ..." if len(timed) > 3 else "")
    return (
        f"{len(timed)} of {total} parts ({labels}) could not be captured as a CUDA graph "
        f"({timed[0][1]}) and were timed eagerly: their times include the host's kernel launches, "
        "which engines that replay CUDA graphs do not pay"
    )


def time_parts(
    parts: Sequence[Part],
    quick: bool,
    device: torch.device,
    progress: Callable[[str], None],
    notes: list[str] | None = None,
) -> list[Measurement]:
    """Measurements of every part, in the order given; each pass is one of their rounds.

    On a GPU, parts that had to be timed eagerly are reported in one line added to ``notes``.
    """
    policy = QUICK_PASS if quick else DEFAULT_PASS
    timed = [_Timed(part) for part in parts]
    clock = WaitClock.start(device)
    for number in range(policy.passes):
        for t in timed:
            if t.slow and quick:
                continue  # its one sample is the first run of the first pass
            progress(f"{t.part.label} (pass {number + 1}/{policy.passes})")
            clock.reset()
            times = _pass(t, number, policy, device)
            _, share = clock.lap()
            t.times.extend(times)
            t.passes.extend([number] * len(times))
            if share is not None:
                t.waits.append(share)
    eager = [(t.part.label, t.eager_reason) for t in timed if t.eager_reason]
    if eager and notes is not None:
        notes.append(eager_note(eager, len(timed)))
    return [t.measurement() for t in timed]
