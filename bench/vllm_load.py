"""The load plan against a real serving engine: vLLM's CPU build under open-loop load.

For each architecture (random weights, bf16 — float32 on a CPU with AVX2 but no AVX-512, see
``--dtype`` —, served by ``scripts/vllm-cpu.sh``'s vLLM through
``tests/vllm_server.py``; the load generator is ``tests/vllm_load.py``):

* ``ttft``: the time to first token of one request alone on the idle server at prompts of
  128 … 2048 tokens (the median of a few), against the plan's ``loads[].ttftLadder``;
* ``load``: open-loop Poisson arrivals (fixed seed) at rates from well below to past the server's
  throughput, for two mixes (a long prompt and a short output, a short prompt and a long output):
  the median TTFT, the median ITL (client stamps of every streamed token) and the running batch
  (``vllm:num_requests_running`` over the window) against ``loads[].rates[]``;
* ``max-rate``: the largest rate that keeps the median TTFT and ITL within two target pairs and
  does not saturate, by bisection on the rate, against ``loads[].maxRequestRate``.

The host's state: a shared VM moves between speeds for minutes at a time, and near saturation a
window in its slow state misses targets the fast state meets (at one rate three runs read a median
ITL of 19.8–29.4 ms). Its compute and its memory bandwidth change level apart, and a prompt step is
compute-bound where a decode step reads every weight. Every window is therefore probed before and
after on both, with a few lone prompts on the idle server and the C read loop of
``bench/stream.c``, starts once the host is within :data:`STATE_TOLERANCE` (compute) and
:data:`MEMORY_TOLERANCE` (memory) of the fastest states it has shown (waiting a while for it), and
a bisection try that misses the targets with the host slow around it is tried once more. The
profiles are taken likewise in the fastest memory state seen (the read loop before and after each),
and the plan is the one of them with the faster lone prompt. Both sides are read in the host's fast
state, as ``tests/engine/test_plan_against_vllm.py`` reads them, and the record gives each window's
and each profile's state. Near the knee a window's outcome also depends on its arrivals: a
bisection try runs up to :data:`PATHS_PER_TRY` arrival paths (seeds) and meets the targets when
most of them do.

The window of a run: arrivals last
``max(MIN_SECONDS, LIFETIMES × lifetime, min(REQUESTS / rate, MAX_SECONDS))``
where a lifetime is one request's idle latency (its TTFT and ``output − 1`` idle steps); the first
lifetime of arrivals (at least a quarter of them) is the warm-up, since by Little's law the running
batch reaches its level after one lifetime; the requests sent after it are measured, each to its
last token. The rates are multiples of the server's own throughput at the mix (the requests per
second a burst of them completes), so that they straddle saturation on any host; the targets
likewise are multiples of the idle TTFT and ITL. The max rate is bisected (in log space) between
the sweep's last rate within the targets and its first beyond them, for the first mix.

The prediction: ``roofline profile --model`` with the load flags (``--prompt-tokens``,
``--output-tokens``, ``--request-rate``, ``--ttft-slo``, ``--itl-slo``,
``--max-num-batched-tokens``, ``--max-num-seqs``), run from vLLM's environment so that vLLM's own
kernels are timed, then ``roofline plan --from`` with each mix's and target pair's flags.

The shapes are small on purpose: a bench of two models × (a TTFT ladder, two mixes × four rates,
two bisections) must fit about an hour of a 2-vCPU host, and a step of a hidden-1024, 8-layer
model is milliseconds, so that a rate past saturation is a few requests a second and a window of
a hundred requests is a minute.

    python bench/vllm_load.py [--part ttft|load|max-rate] [--quick] [--only NAME]
                              [--dtype bfloat16|float32] [--out PATH]

``--dtype`` defaults to the one the real-engine tests choose on this CPU
(``tests/host_cpu.serving_dtype``): bf16, or float32 where the CPU has AVX2 but no AVX-512, where
vLLM's bf16 GEMMs run a 512-token prompt of the Llama 17-19 times as long as on an AVX-512 host
and the bench's windows would hold a handful of requests each (its rates scale with the server's
throughput, its windows are capped). Both sides serve and profile in the same dtype.

The record is rewritten after each architecture, so that a run cut short keeps the ones done.

Goals: TTFT within 15% geometric mean / 30% worst; loaded median ITL and TTFT within 20% / 40%
over the rates below saturation; the max rate within 25% of the measured one.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profiler_vs_references import cpu_features, cpu_model
from stream_reference import compile_stream, monitor_level
from vllm_reference import CHUNK_TOKENS, engine_identity, load_average, served, stamp

sys.path[:0] = [str(Path(__file__).resolve().parents[1])]

from tests import host_cpu, vllm_load, vllm_server  # noqa: E402

PROMPTS = (128, 256, 512, 1024, 2048)
QUICK_PROMPTS = (128, 512, 2048)
TTFT_REPEATS = 5
#: (prompt, output) of the two mixes: prefill-heavy and decode-heavy.
MIXES = ((512, 64), (128, 256))
#: Rates as multiples of the server's measured throughput (a burst of :data:`PROBE_REQUESTS`):
#: the last is past saturation by construction.
RATE_FACTORS = (0.25, 0.5, 0.75, 1.5)
QUICK_RATE_FACTORS = (0.3, 0.7, 1.5)
PROBE_REQUESTS = 32
#: Target pairs as multiples of the idle (TTFT, ITL) at the mix's prompt.
TARGETS = ((2.0, 1.5), (5.0, 3.0))
#: Bisection tries between the sweep's last rate within the targets and its first beyond them.
BISECTION_STEPS = 3
#: Arrival paths (seeds) per bisection try: near the knee a window's outcome depends on its
#: arrivals (one path's early burst leaves a queue that a minute at 95% busy does not drain), so
#: a try meets the targets when most of its paths do, stopping once that is decided.
PATHS_PER_TRY = 3
#: A run's arrivals last at least MIN_SECONDS and LIFETIMES request lifetimes, and long enough for
#: REQUESTS arrivals up to MAX_SECONDS (windows of 21–40 requests moved a median TTFT by half
#: between neighbouring rates).
MIN_SECONDS, LIFETIMES, REQUESTS, MAX_SECONDS = 45.0, 4.0, 100, 100.0
MAX_NUM_SEQS = 128
GOAL_TTFT = (0.15, 0.30)
GOAL_LOADED = (0.20, 0.40)
GOAL_MAX_RATE = 0.25
PROFILE_TIMEOUT_SECONDS = 1800
#: Profiles taken at most, while each says another process held the CPUs (``CpuContention``).
PROFILES = 3
#: The host's state: this host moves between speeds for minutes at a time (a lone prompt step
#: 25–40% slower), and near saturation a window in the slow state misses targets the fast state
#: meets. Each window is probed before and after with PROBE_REPEATS lone prompts of PROBE_PROMPT
#: tokens on the idle server (the median TTFT over the fastest such median seen, the idle
#: ladder's included: 1.0 is the fastest state seen); it starts within STATE_TOLERANCE of that,
#: waiting up to SETTLE_SECONDS (probing every SETTLE_POLL_SECONDS), and a bisection try that
#: misses the targets with the host slower than that before or after it is tried once more.
PROBE_PROMPT, PROBE_REPEATS, STATE_TOLERANCE = 512, 3, 0.10
SETTLE_SECONDS, SETTLE_POLL_SECONDS = 240.0, 20.0
#: The host's memory state, apart from its compute: the C read loop (``bench/stream.c``, every
#: CPU, arrays of MONITOR_BYTES, far past the caches) with the server idle, the fastest rate seen
#: over its rate now (1.0: the fastest memory state seen). A decode step reads every weight, and
#: the prompt probe above is blind to this state: the Qwen3's lone decode step read 33 ms in the
#: windows of one run and 42 ms in the step log of another, its lone 512-token prompt 432 and
#: 450 ms.
#: Its tolerance is wider than the prompt probe's: the loop's confirmed rate scattered by up to 16%
#: within minutes on an AMD EPYC VM (28.6–33.7 GB/s, a lone request's decode steps within 10%
#: meanwhile), where the level changes seen lay 21–45% apart (``warning_codes.STATE_GAP``).
MONITOR_BYTES, MEMORY_TOLERANCE = 256 << 20, 0.15
#: Profiles taken for the plan (each as above, each started in the fastest memory state seen,
#: waiting up to SETTLE_SECONDS for it); the plan uses, of those whose read loop (the mean of its
#: rates before and after) lay within MEMORY_TOLERANCE of the fastest rate seen by the end of the
#: bench, the one whose lone prompt of PROBE_PROMPT tokens is the faster, as the windows run in
#: the fastest state seen. Up to MAX_STATE_PROFILES are taken while none lay in that state.
STATE_PROFILES, MAX_STATE_PROFILES = 2, 4

CONFIGS: dict[str, dict[str, Any]] = {
    # Llama with grouped-query attention 16:4 (head 64), hidden 1024, 8 layers: ~100 M
    # parameters besides the vocabulary; steps of milliseconds on two cores.
    "llama-small": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 1024,
        "intermediate_size": 2816,
        "num_hidden_layers": 8,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "vocab_size": 32000,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False,
    },
    # Qwen3 with q/k RMSNorm, head 128 over hidden 1536 / 12 heads (GQA 12:4), 6 layers and a
    # tied 151936 vocabulary: a heavier sampling head and more KV bytes per token.
    "qwen3-small": {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_size": 1536,
        "intermediate_size": 4096,
        "num_hidden_layers": 6,
        "num_attention_heads": 12,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "vocab_size": 151936,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True,
    },
}


Mix = tuple[int, int]


@dataclass(frozen=True)
class HostState:
    """The host's speed against the fastest it has shown (1.0: the fastest; 1.3: 30% slower):
    ``compute`` by lone prompts on the idle server, ``memory`` by the C read loop (NaN without a
    C compiler: unknown, never slow)."""

    compute: float
    memory: float

    @property
    def slow(self) -> bool:
        memory = 1.0 if math.isnan(self.memory) else self.memory
        return self.compute > 1 + STATE_TOLERANCE or memory > 1 + MEMORY_TOLERANCE


@dataclass(frozen=True)
class Profiled:
    """One profile: its lone PROBE_PROMPT-token TTFT, the read loop's mean rate before and after
    it (bytes/s; NaN without a C compiler) and its result file."""

    ttft: float
    read_rate: float
    path: Path


MaxRateKey = tuple[Mix, int]
#: The measured max rate, every (rate, within the targets, host state before/after) window, and
#: the targets in seconds.
MaxRateRecord = tuple[float, list[tuple[float, bool, str]], tuple[float, float]]


@dataclass
class Architecture:
    name: str
    config: dict[str, Any]
    #: What both vLLM and the profile run the model in.
    dtype: str
    ttft: dict[int, list[float]] = field(default_factory=dict)
    idle_itl: dict[tuple[int, int], float] = field(default_factory=dict)
    #: Requests per second each mix's burst of :data:`PROBE_REQUESTS` completed.
    throughput: dict[tuple[int, int], float] = field(default_factory=dict)
    runs: dict[tuple[int, int], list[vllm_load.LoadRun]] = field(default_factory=dict)
    #: Each run's host state before and after it (:func:`host_state`).
    states: dict[vllm_load.LoadRun, tuple[HostState, HostState]] = field(default_factory=dict)
    #: The fastest lone-prompt TTFT of PROBE_PROMPT tokens seen (a probe's or the ladder's
    #: median): the host's fast compute state.
    fastest_probe: float = math.inf
    probes: int = 0
    #: The C read loop (None without a C compiler) and the fastest rate it has read (bytes/s):
    #: the host's fast memory state.
    monitor: Path | None = None
    fastest_read: float = 0.0
    #: (mix, target pair) → (measured max rate, tries, targets in seconds).
    max_rates: dict[MaxRateKey, MaxRateRecord] = field(default_factory=dict)
    predicted: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)
    predicted_max: dict[MaxRateKey, dict[str, Any] | None] = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def lifetime(arch: Architecture, mix: tuple[int, int]) -> float:
    prompt, output = mix
    return statistics.median(arch.ttft[prompt]) + (output - 1) * arch.idle_itl[mix]


def window(rate: float, life: float) -> tuple[float, float]:
    duration = max(MIN_SECONDS, LIFETIMES * life, min(REQUESTS / rate, MAX_SECONDS))
    return duration, max(life, duration / 4)


def roofline(*args: str, python: str) -> None:
    env = dict(os.environ)
    source = Path(__file__).resolve().parents[1] / "profiler"
    env["PYTHONPATH"] = os.pathsep.join([str(source), env.get("PYTHONPATH", "")])
    command = [python, "-m", "roofline_profiler.cli.commands", *args]
    proc = subprocess.run(
        command, capture_output=True, text=True, env=env, check=False,
        timeout=PROFILE_TIMEOUT_SECONDS,
    )  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"roofline {args[0]} failed: {proc.stderr.strip()[-2000:]}")


def load_flags(mix: tuple[int, int], rates: list[float], targets: tuple[float, float]) -> list[str]:
    return [
        "--prompt-tokens", str(mix[0]), "--output-tokens", str(mix[1]),
        "--request-rate", ",".join(f"{r:.4g}" for r in rates),
        "--ttft-slo", f"{targets[0]:.4g}s", "--itl-slo", f"{targets[1] * 1e3:.4g}ms",
        "--max-num-batched-tokens", str(CHUNK_TOKENS), "--max-num-seqs", str(MAX_NUM_SEQS),
    ]  # fmt: skip


def only_load(path: Path) -> dict[str, Any]:
    loads = vllm_load.result_loads(json.loads(path.read_text()))
    if len(loads) != 1:
        raise SystemExit(f"{path}: {len(loads)} loads, expected one")
    load: dict[str, Any] = loads[0]
    return load


def measure_idle(arch: Architecture, server: Any, prompts: tuple[int, ...]) -> None:
    for prompt in prompts:
        arch.ttft[prompt] = vllm_load.idle_ttft(server, prompt, TTFT_REPEATS, seed=prompt)
        median = statistics.median(arch.ttft[prompt])
        if prompt == PROBE_PROMPT:
            arch.fastest_probe = min(arch.fastest_probe, median)
        print(f"[{stamp()}] idle TTFT {prompt}: {median * 1e3:.0f} ms", flush=True)
    for mix in MIXES:
        body = vllm_server.prompts(1, mix[0], 7, server.vocab_size)[0]
        request = vllm_load.stream_completion(server, body, mix[1])
        arch.idle_itl[mix] = statistics.median(request.itl_seconds)
        arch.ttft.setdefault(mix[0], [request.ttft_seconds])
        arch.throughput[mix] = vllm_load.burst_throughput(server, PROBE_REQUESTS, *mix)
        print(
            f"[{stamp()}] {mix}: idle ITL {arch.idle_itl[mix] * 1e3:.1f} ms, "
            f"throughput {arch.throughput[mix]:.3g} req/s",
            flush=True,
        )


def read_rate(arch: Architecture) -> float:
    """The C read loop's rate now (bytes/s; NaN without a C compiler), kept if the fastest."""
    level = monitor_level(arch.monitor, MONITOR_BYTES, len(os.sched_getaffinity(0)))
    if level is None:
        return math.nan
    arch.fastest_read = max(arch.fastest_read, level)
    return level


def host_state(arch: Architecture, server: Any) -> HostState:
    """The host's speed now against the fastest state seen: the median TTFT of PROBE_REPEATS
    lone prompts of PROBE_PROMPT tokens (distinct prompts) over the fastest such median seen,
    and the fastest read rate seen over the read loop's rate now."""
    arch.probes += 1
    times = vllm_load.idle_ttft(server, PROBE_PROMPT, PROBE_REPEATS, seed=1000 + arch.probes)
    median = statistics.median(times)
    arch.fastest_probe = min(arch.fastest_probe, median)
    level = read_rate(arch)
    return HostState(median / arch.fastest_probe, arch.fastest_read / level)


def settled(arch: Architecture, server: Any) -> HostState:
    """The host state once it is not slow (:attr:`HostState.slow`) on either count, or after
    waiting SETTLE_SECONDS for it."""
    state, waited = host_state(arch, server), 0.0
    while state.slow and waited < SETTLE_SECONDS:
        print(f"[{stamp()}] host at {shown(state)} of its fastest state; waiting", flush=True)
        time.sleep(SETTLE_POLL_SECONDS)
        waited += SETTLE_POLL_SECONDS
        state = host_state(arch, server)
    return state


def settled_memory(arch: Architecture) -> float:
    """The read loop's rate once it is within MEMORY_TOLERANCE of the fastest seen, or after
    waiting SETTLE_SECONDS for it (no server: before a profile)."""
    level, waited = read_rate(arch), 0.0
    while arch.fastest_read > level * (1 + MEMORY_TOLERANCE) and waited < SETTLE_SECONDS:
        state = arch.fastest_read / level
        print(f"[{stamp()}] memory at {state:.2f} of its fastest state; waiting", flush=True)
        time.sleep(SETTLE_POLL_SECONDS)
        waited += SETTLE_POLL_SECONDS
        level = read_rate(arch)
    return level


def drained(server: Any) -> None:
    """Until the server runs and queues no request (a saturated window's client stops waiting
    before the engine has finished its queue), at most SETTLE_SECONDS."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while time.monotonic() < deadline:
        sample = server.metrics()
        if sample.running == 0 and sample.waiting == 0:
            return
        time.sleep(1.0)


def probed_run(
    arch: Architecture, server: Any, rate: float, mix: Mix, life: float, seed: int
) -> vllm_load.LoadRun:
    """One load window in the host's fastest state (:func:`settled`), probed again after it
    once the server is idle."""
    before = settled(arch, server)
    duration, warmup = window(rate, life)
    run = vllm_load.run_load(server, rate, *mix, duration, warmup, seed=seed)
    drained(server)
    arch.states[run] = (before, host_state(arch, server))
    return run


def slow_host(arch: Architecture, run: vllm_load.LoadRun) -> bool:
    """Whether the host was slow (:attr:`HostState.slow`) before or after ``run``."""
    return any(state.slow for state in arch.states.get(run, ()))


def shown(state: HostState) -> str:
    return f"{state.compute:.2f}/{state.memory:.2f}"


def shown_state(arch: Architecture, run: vllm_load.LoadRun) -> str:
    """The host before and after ``run``, each as compute/memory."""
    unknown = HostState(math.nan, math.nan)
    before, after = arch.states.get(run, (unknown, unknown))
    return f"{shown(before)} → {shown(after)}"


def rates_for(arch: Architecture, mix: tuple[int, int], quick: bool) -> list[float]:
    factors = QUICK_RATE_FACTORS if quick else RATE_FACTORS
    return [f * arch.throughput[mix] for f in factors]


def targets_for(arch: Architecture, mix: tuple[int, int], pair: int) -> tuple[float, float]:
    ttft_factor, itl_factor = TARGETS[pair]
    return (
        ttft_factor * statistics.median(arch.ttft[mix[0]]),
        itl_factor * arch.idle_itl[mix],
    )


def measure_architecture(
    name: str, parts: set[str], quick: bool, dtype: str, work: Path
) -> Architecture:
    config = CONFIGS[name]
    arch = Architecture(name, config, dtype, monitor=compile_stream(work))
    if arch.monitor is None:
        arch.notes.append("no C compiler: the host's memory state was not probed")
    config_path = work / f"{name}.json"
    config_path.write_text(json.dumps(config, indent=2))
    longest = max(max(PROMPTS), *(p + o for p, o in MIXES)) + 16
    print(f"== {name}", flush=True)
    with served(config, work / name, MAX_NUM_SEQS, longest, dtype=dtype) as server:
        print(f"vLLM ready in {server.start_seconds:.0f} s", flush=True)
        measure_idle(arch, server, QUICK_PROMPTS if quick else PROMPTS)
        for mix in MIXES if "load" in parts or "max-rate" in parts else ():
            if "load" in parts:
                life = lifetime(arch, mix)
                arch.runs[mix] = []
                for i, rate in enumerate(rates_for(arch, mix, quick)):
                    run = probed_run(arch, server, rate, mix, life, seed=i)
                    arch.runs[mix].append(run)
                    shown = f"{run.summary()}, load {load_average():.1f}, host "
                    shown += shown_state(arch, run)
                    print(f"[{stamp()}] {mix}: {shown}", flush=True)
            if "max-rate" in parts and mix == MIXES[0]:
                for pair in range(len(TARGETS)):
                    arch.max_rates[(mix, pair)] = bisect(arch, server, mix, pair, quick)
        python = str(server.python)
    profile(arch, config_path, python, quick)
    return arch


def bisect(
    arch: Architecture, server: Any, mix: tuple[int, int], pair: int, quick: bool
) -> MaxRateRecord:
    targets = targets_for(arch, mix, pair)
    life = lifetime(arch, mix)

    def path(rate: float, seed: int) -> bool:
        """One window on one arrival path; a miss with the host slow around it is run again."""
        for attempt in range(2):
            run = probed_run(arch, server, rate, mix, life, seed=seed + 1000 * attempt)
            ok = vllm_load.within_targets(run, *targets)
            print(
                f"[{stamp()}] bisect {mix} pair {pair} path {seed}: {run.summary()}, host "
                f"{shown_state(arch, run)}",
                flush=True,
            )
            tried.append((rate, ok, f"path {seed}, host {shown_state(arch, run)}"))
            if ok or not slow_host(arch, run):
                break
        return ok

    def meets(rate: float) -> bool:
        votes = {True: 0, False: 0}
        for seed in range(99, 99 + PATHS_PER_TRY):
            votes[path(rate, seed)] += 1
            if max(votes.values()) > PATHS_PER_TRY // 2:
                break
        return votes[True] > votes[False]

    tried: list[tuple[float, bool, str]] = []

    low, high = 0.0, rates_for(arch, mix, quick)[-1]
    for run in arch.runs.get(mix, []):
        if vllm_load.within_targets(run, *targets):
            low = max(low, run.rate)
        elif not slow_host(arch, run):  # a miss in the slow state bounds nothing
            high = min(high, run.rate)
    steps = BISECTION_STEPS if low > 0 else BISECTION_STEPS + 2
    best, _ = vllm_load.bisect_max_rate(meets, low, max(high, low * 1.01), steps)
    return best, tried, targets


def profile(arch: Architecture, config_path: Path, python: str, quick: bool) -> None:
    """The profile with the first mix's flags, then ``plan --from`` for every mix and pair."""
    result = config_path.parent / f"{arch.name}-result.json"
    first = MIXES[0]
    # The mixes' mean decode contexts, and the ladder's longest prompt (the ladder reaches the
    # longest context profiled).
    contexts = sorted({p + o // 2 for p, o in MIXES} | {max(PROMPTS)})
    args = [
        "profile", "--device", "cpu", "--dtype", arch.dtype, "--model", str(config_path),
        "--context", ",".join(str(c) for c in contexts),
        *load_flags(first, rates_for(arch, first, quick), targets_for(arch, first, 0)),
        "--json", str(result),
    ]  # fmt: skip
    arch.commands.append(shown_command(args, config_path.parent))
    # The host's fastest state, as the windows were run in.
    taken: list[Profiled] = []
    for i in range(MAX_STATE_PROFILES):
        if i >= STATE_PROFILES and in_memory_state(arch, taken):
            break
        before = settled_memory(arch)
        print(f"[{stamp()}] profiling", flush=True)
        path = result.with_name(f"{result.stem}-{i}.json")
        take_profile(arch, [*args[:-1], str(path)], python)
        ladder = {p["promptTokens"]: p["ttftSeconds"] for p in only_load(path)["ttftLadder"]}
        taken.append(Profiled(ladder[PROBE_PROMPT], (before + read_rate(arch)) / 2, path))
    chosen = in_memory_state(arch, taken)
    plan = min(chosen or taken, key=lambda p: p.ttft if chosen else -p.read_rate)
    result.write_bytes(plan.path.read_bytes())
    arch.notes.append(
        f"{len(taken)} profiles' lone {PROBE_PROMPT}-token TTFT and memory state (the fastest "
        "read rate seen over the mean of the two around the profile): "
        + ", ".join(
            f"{p.ttft * 1e3:.0f} ms at {arch.fastest_read / p.read_rate:.2f}" for p in taken
        )
        + (
            "; the plan is the faster one's of those within the memory tolerance"
            if chosen
            else "; none within the memory tolerance: the plan is the one read in the fastest "
            "memory state"
        )
    )
    for mix in MIXES:
        for pair in range(len(TARGETS)):
            out = config_path.parent / f"{arch.name}-plan-{mix[0]}-{mix[1]}-{pair}.json"
            flags = load_flags(mix, rates_for(arch, mix, quick), targets_for(arch, mix, pair))
            args = ["plan", "--from", str(result), "--model", str(config_path), *flags]
            arch.commands.append(shown_command([*args, "--json", out.name], config_path.parent))
            roofline(*args, "--json", str(out), python=python)
            load = only_load(out)
            arch.predicted.setdefault(mix, load)
            arch.predicted_max[(mix, pair)] = load.get("maxRequestRate")


def in_memory_state(arch: Architecture, taken: list[Profiled]) -> list[Profiled]:
    """The profiles whose read loop read within MEMORY_TOLERANCE of the fastest rate seen
    (every one without a C compiler)."""
    return [
        p
        for p in taken
        if math.isnan(p.read_rate) or arch.fastest_read <= p.read_rate * (1 + MEMORY_TOLERANCE)
    ]


def take_profile(arch: Architecture, args: list[str], python: str) -> None:
    """One profile; the server is gone, and a profile whose parts all waited for a CPU another
    process held (CpuContention: its steps too slow) is taken again, as bench/vllm_vs_plan.py's
    test does."""
    for _ in range(PROFILES):
        roofline(*args, python=python)
        (device,) = json.loads(Path(args[-1]).read_text())["devices"]
        warnings = [w for plan in device.get("models", ()) for w in plan["warnings"]]
        if not any(w.startswith("CpuContention") for w in warnings):
            return
        arch.notes.append("a profile reported CpuContention and was taken again")


def shown_command(args: list[str], workdir: Path) -> str:
    """A command as the record shows it: files by their names, not the run's scratch directory."""
    prefix = f"{workdir}{os.sep}"
    return "roofline " + " ".join(a.removeprefix(prefix) for a in args)


def ttft_pairs(arch: Architecture) -> list[tuple[int, float, float]]:
    ladder = {p["promptTokens"]: p["ttftSeconds"] for p in arch.predicted[MIXES[0]]["ttftLadder"]}
    return [
        (prompt, ladder[prompt], statistics.median(times))
        for prompt, times in sorted(arch.ttft.items())
        if prompt in ladder and len(times) > 1
    ]


def loaded_rows(arch: Architecture) -> list[tuple[Mix, vllm_load.LoadRun, dict[str, Any]]]:
    """Each measured run with the plan's point at its rate (the rates went to the profiler with
    four significant digits: the nearest point, which must be within 0.1%)."""
    rows = []
    for mix, runs in arch.runs.items():
        predicted = arch.predicted[mix]["rates"]
        for run in runs:
            point = min(predicted, key=lambda p: abs(p["requestsPerSecond"] - run.rate))
            if abs(point["requestsPerSecond"] / run.rate - 1) > 1e-3:
                raise SystemExit(f"the plan of {mix} has no rate {run.rate:.4g} /s")
            rows.append((mix, run, point))
    return rows


def loaded_row(arch: Architecture, mix: Mix, run: vllm_load.LoadRun, point: dict[str, Any]) -> str:
    cells = [
        f"{mix[0]}/{mix[1]}", f"{run.rate:.3g}", f"{len(run.completed)}/{len(run.measured)}",
        f"{run.ttft_median_seconds * 1e3:.0f} ms", f"{point['ttftMedianSeconds'] * 1e3:.0f} ms",
        f"{run.itl_median_seconds * 1e3:.1f} ms", f"{point['itlMedianSeconds'] * 1e3:.1f} ms",
        f"{run.running_batch:.1f}", f"{point['runningBatch']:.1f}",
        f"{run.saturated}/{point['saturated']}", f"{run.load_average[0]:.1f}",
        shown_state(arch, run),
    ]  # fmt: skip
    return "| " + " | ".join(cells) + " |"


def verdict(what: str, geo: float, worst: float, goals: tuple[float, float]) -> str:
    met = geo <= goals[0] and worst <= goals[1]
    return f"{what}: {geo:.1%} geometric mean / {worst:.1%} worst ({'met' if met else 'missed'})"


def record(archs: list[Architecture], args: argparse.Namespace, started: dt.datetime) -> str:
    lines = [
        "# The load plan against vLLM's CPU build", "",
        f"- Host: {cpu_model()} ({cpu_features()}), {len(os.sched_getaffinity(0))} CPUs; load "
        "average at the end "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        f"- Engine: {engine_identity()}; started {started:%Y-%m-%d %H:%M} UTC",
        f"- Command: python bench/vllm_load.py {' '.join(sys.argv[1:])}", "",
    ]  # fmt: skip
    verdicts = []
    for arch in archs:
        lines += [f"## {arch.name}", "", "```json", json.dumps(arch.config), "```", ""]
        lines.append(f"- vLLM served it and the profile ran it in {arch.dtype}")
        lines += [f"- `{c}`" for c in arch.commands] + [f"- {n}" for n in arch.notes] + [""]
        if arch.ttft and arch.predicted:
            pairs = ttft_pairs(arch)
            lines += ["| prompt | vLLM TTFT (median) | plan | error |", "|---|---|---|---|"]
            lines += [
                f"| {p} | {m * 1e3:.1f} ms | {q * 1e3:.1f} ms | {q / m - 1:+.0%} |"
                for p, q, m in pairs
            ]
            missing = sorted(
                {p for p, t in arch.ttft.items() if len(t) > 1} - {p for p, *_ in pairs}
            )
            if missing:
                lines += ["", f"Measured, not in the plan's ladder: prompts {missing}"]
            geo, worst = vllm_load.log_errors([(q, m) for _, q, m in pairs])
            verdicts.append(verdict(f"{arch.name} idle TTFT", geo, worst, GOAL_TTFT))
            lines += ["", verdicts[-1], ""]
        if arch.runs and arch.predicted:
            lines += [
                "| mix | rate /s | measured | TTFT med | plan | ITL med | plan | running | plan "
                "| saturated (vLLM/plan) | load | host before → after (compute/memory) |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|",
            ]
            pairs_ttft: list[tuple[float, float]] = []
            pairs_itl: list[tuple[float, float]] = []
            for mix, run, point in loaded_rows(arch):
                lines.append(loaded_row(arch, mix, run, point))
                if not run.saturated and not point["saturated"]:
                    pairs_ttft.append((point["ttftMedianSeconds"], run.ttft_median_seconds))
                    pairs_itl.append((point["itlMedianSeconds"], run.itl_median_seconds))
            for what, loaded in (("TTFT", pairs_ttft), ("ITL", pairs_itl)):
                if loaded:
                    geo, worst = vllm_load.log_errors(loaded)
                    name = f"{arch.name} loaded {what} over {len(loaded)} rates"
                    verdicts.append(verdict(name, geo, worst, GOAL_LOADED))
                    lines += ["", verdicts[-1]]
            lines.append("")
        for (mix, pair), (best, tries, targets) in arch.max_rates.items():
            predicted = arch.predicted_max.get((mix, pair))
            shown = (
                "none"
                if predicted is None
                else f"{predicted['requestsPerSecond']:.3g} /s ({predicted['limitedBy']})"
            )
            line = (
                f"{arch.name} {mix[0]}/{mix[1]} TTFT ≤ {targets[0] * 1e3:.0f} ms, ITL ≤ "
                f"{targets[1] * 1e3:.1f} ms: vLLM {best:.3g} /s (windows: each try's arrival "
                "paths, the host before/after: "
                + ", ".join(f"{r:.3g}{'+' if ok else '-'} {h}" for r, ok, h in tries)
                + f"), plan {shown}"
            )
            if predicted is not None and best > 0:
                error = predicted["requestsPerSecond"] / best - 1
                line += f" {error:+.0%} ({'met' if abs(error) <= GOAL_MAX_RATE else 'missed'})"
            verdicts.append(line)
            lines.append(f"- {line}")
        lines.append("")
    lines += ["## Verdicts", "", *[f"- {v}" for v in verdicts], ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("ttft", "load", "max-rate"), action="append")
    parser.add_argument("--quick", action="store_true", help="fewer prompts and rates")
    parser.add_argument("--only", choices=sorted(CONFIGS), action="append")
    parser.add_argument(
        "--dtype",
        choices=("bfloat16", "float32"),
        default=host_cpu.serving_dtype(host_cpu.cpu_flags()),
        help="what vLLM serves and the profile runs (default: bf16, float32 on AVX2 without "
        "AVX-512; this CPU: %(default)s)",
    )
    parser.add_argument("--out", help="the record (default bench/results/vllm_load-<cpu>.md)")
    args = parser.parse_args()
    parts = set(args.part or ("ttft", "load", "max-rate"))
    slug = "-".join(cpu_model().lower().replace("(r)", "").replace("(tm)", "").split()[:4])
    out = Path(args.out or Path(__file__).parent / "results" / f"vllm_load-{slug}.md")
    started = dt.datetime.now(dt.UTC)
    archs: list[Architecture] = []
    with tempfile.TemporaryDirectory(prefix="vllm-load-") as tmp:
        for name in args.only or sorted(CONFIGS):
            archs.append(measure_architecture(name, parts, args.quick, args.dtype, Path(tmp)))
            out.write_text(record(archs, args, started))
            print(f"wrote {out}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
