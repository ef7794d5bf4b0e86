"""vLLM's step, part by part, from inside the engine, against the profile's parts of the same model.

`vllm_vs_plan.py` scores the plan's whole step against vLLM's inter-token latency; where they
differ it cannot say which part does. This bench asks the engine itself: vLLM serves a
configuration with its torch profiler on (``--profiler-config``, shapes recorded, no stacks), and
during each batch's steady decode window (exactly B requests running, no prompt chunk) the worker
is traced for a few seconds (``/start_profile``, ``/stop_profile``). From the trace, per traced
step (one ``execute_context`` of the worker): the step itself, the layers' weight GEMMs (the
quantized kernels, ``_C::cpu_gemm_wna16`` and the int8 ones, or the bf16 ``_C::onednn_mm`` of the
layers), the lm_head (the step's last ``_C::onednn_mm``), attention with the KV-cache write, the
sampler, and the rest. The profiler (``roofline profile --model``, run from vLLM's environment
while the engine idles, so that it times the same kernels) measures the model between two traced
runs; the record sets its parts beside the engine's: the layers' GEMMs (a layer body less its
glue, which the engine's compiled step fuses, times the layers), the head, attention, and the
rest (the engine's own per-step work, ``core/engines.py``).

The torch profiler costs each traced operation some microseconds, so the traced step is longer
than the engine's untraced one (the record shows the window's ITL beside it); the kernels' own
durations are what the comparison is about.

    python bench/vllm_trace.py --set quantized --only NAME [--batches 1,2,4,8,16] [--out PATH]

Needs ``scripts/vllm-cpu.sh`` (run on first use) and the project's profiler.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import os
import statistics
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profiler_prediction import predict
from profiler_vs_references import cpu_model, cpu_slug
from roofline_profiler.core.decode_model import (
    ModelMeasurements,
    attention_seconds,
    fuses_glue,
    layers_of_kind,
)
from roofline_profiler.core.engines import VLLM_CPU
from roofline_profiler.wire.result import ProfileResult
from vllm_reference import (
    CHUNK_TOKENS,
    engine_identity,
    load_average,
    served,
    stamp,
    vllm_server,  # the engine's driver, shared with the tests
)
from vllm_vs_plan import SERVE_FLAGS, SETS

BATCHES = (1, 2, 4, 8, 16)
PROMPT = 128
TRACE_SECONDS = 3.0
#: Decode steps each batch's requests generate: enough for the wait for a steady window, the
#: traced seconds and the profiler's flush at the slowest step these models take (~0.15 s).
DECODE_STEPS = 160
STEADY_TIMEOUT = 300.0

#: The worker's record of one step, and the kernels the parts are made of.
STEP_EVENT = "execute_context"
WEIGHT_GEMMS = (
    "_C::cpu_gemm_wna16",
    "_C::int4_scaled_mm_cpu",
    "_C::onednn_scaled_mm",
    "_C::int8_scaled_mm_with_quant",
    "_C::onednn_scaled_int8_quant",
)
DENSE_GEMM = "_C::onednn_mm"
ATTENTION = ("vllm::unified_attention_with_output", "vllm::unified_kv_cache_update")
SAMPLER = ("_C::fused_gumbel_argmax",)
GEMMS = "layers' GEMMs"
PARTS = (GEMMS, "lm_head", "attention", "sampler", "rest")


@dataclass(frozen=True)
class TracedStep:
    seconds: float
    parts: Mapping[str, float]


def step_parts(start: float, end: float, ops: Sequence[dict[str, Any]]) -> TracedStep:
    """One traced step's parts from the operations that start in ``[start, end)`` (trace
    events, microseconds): the worker's ``execute_context`` and what follows it up to the next
    one (the sampler, the wait for the engine core's next schedule). Operations nested in a
    counted one (the kernels inside ``unified_attention_with_output``) count once, through the
    outer one."""
    inside = sorted((e for e in ops if start <= e["ts"] < end), key=lambda e: e["ts"])
    parts = dict.fromkeys(PARTS, 0.0)
    counted_until = -1.0
    dense = [e for e in inside if e["name"] == DENSE_GEMM]
    head = dense[-1] if dense else None
    for event in inside:
        if event["ts"] < counted_until:
            continue
        name = event["name"]
        if event is head:
            part = "lm_head"
        elif name in WEIGHT_GEMMS or name == DENSE_GEMM:
            part = GEMMS
        elif name in ATTENTION:
            part = "attention"
        elif name in SAMPLER:
            part = "sampler"
        else:
            continue
        parts[part] += event["dur"] / 1e6
        counted_until = event["ts"] + event["dur"]
    seconds = (end - start) / 1e6
    parts["rest"] = seconds - sum(parts.values())
    return TracedStep(seconds, parts)


def parse_trace(path: Path) -> list[TracedStep]:
    """Every complete step of a worker's trace: from one ``execute_context`` to the next (the
    last is cut by the trace's end)."""
    events = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") == "X"]
    starts = sorted(e["ts"] for e in events if e["name"].startswith(STEP_EVENT))
    ops = [e for e in events if "::" in e["name"]]
    return [step_parts(a, b, ops) for a, b in itertools.pairwise(starts)]


def _post(server: vllm_server.VllmServer, path: str) -> None:
    request = urllib.request.Request(
        server.url + path, data=b"{}", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=600) as rsp:
        rsp.read()


def wait_steady(server: vllm_server.VllmServer, batch: int) -> None:
    """Until one polling interval held only decode steps of exactly ``batch`` sequences."""
    deadline = time.monotonic() + STEADY_TIMEOUT
    last = server.metrics()
    while time.monotonic() < deadline:
        time.sleep(vllm_server.POLL_SECONDS)
        now = server.metrics()
        if vllm_server.Interval.between(last, now).decodes_only(batch):
            return
        last = now
    raise SystemExit(f"vLLM never reached a steady decode window at batch {batch}")


@dataclass(frozen=True)
class BatchTrace:
    batch: int
    itl_seconds: float
    context_tokens: float
    steps: tuple[TracedStep, ...]

    def median(self, part: str | None = None) -> float:
        return median_of(self.steps, part)


def median_of(steps: Iterable[TracedStep], part: str | None = None) -> float:
    """The median traced step, or of one of its parts."""
    return statistics.median(s.seconds if part is None else s.parts[part] for s in steps)


def trace_batch(server: vllm_server.VllmServer, batch: int, traces: Path) -> BatchTrace:
    """Start ``batch`` requests, trace the worker in their steady window, collect the trace."""
    max_tokens = vllm_server.decode_tokens_needed(batch, PROMPT, DECODE_STEPS, CHUNK_TOKENS)
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["window"] = vllm_server.measure_decode(
                server, batch, PROMPT, max_tokens, seed=batch
            )
        except BaseException as error:  # reported below
            result["error"] = error

    before = set(traces.glob("rank0.*.pt.trace.json"))
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    wait_steady(server, batch)
    _post(server, "/start_profile")
    time.sleep(TRACE_SECONDS)
    _post(server, "/stop_profile")
    thread.join()
    if "error" in result:
        raise SystemExit(f"vLLM at batch {batch}: {result['error']!r}")
    (trace,) = set(traces.glob("rank0.*.pt.trace.json")) - before
    steps = tuple(parse_trace(trace))
    if not steps:
        raise SystemExit(f"the trace at batch {batch} holds no complete step: {trace}")
    window = result["window"]
    return BatchTrace(batch, window.itl_seconds, window.context_tokens, steps)


def profile_parts(m: ModelMeasurements, batch: int, context: int) -> tuple[float, dict[str, float]]:
    """The plan's step at ``batch`` (vLLM's CPU engine) and its parts named as the trace's."""
    fused = fuses_glue(m, VLLM_CPU)
    gemms = 0.0
    for kind, times in m.layer_bodies.items():
        body = next(t.seconds for t in times if t.batch == batch)
        glue = next((t.seconds for t in m.layer_glue.get(kind, ()) if t.batch == batch), 0.0)
        gemms += layers_of_kind(m.arch, kind) * (body - glue if fused else body)
    head = next(t.seconds for t in m.head if t.batch == batch)
    attention = m.arch.num_layers * attention_seconds(m, batch, context)[0]
    rest = VLLM_CPU.overhead_seconds(batch, m.arch.num_layers if fused else 0)
    parts = {GEMMS: gemms, "lm_head": head, "attention": attention, "rest": rest}
    return sum(parts.values()), parts


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def table(
    name: str,
    runs: Sequence[Mapping[int, BatchTrace]],
    m: ModelMeasurements,
) -> list[str]:
    rows = [
        f"### {name}",
        "",
        "Per step, medians over the traced steps of both runs; the plan's parts from the profile "
        "between them. GEMMs: the layers' weight GEMMs, all layers.",
        "",
        "| batch | vLLM ITL (window mean, with the trace's stalls) | traced step | plan's step | "
        "GEMMs: vLLM | GEMMs: plan | "
        "plan ÷ vLLM | run 1 ÷ run 2 | lm_head: vLLM / plan | attention: vLLM / plan | "
        "sampler + rest: vLLM / plan's rest |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for batch in sorted(runs[0]):
        traces = [r[batch] for r in runs]
        steps = [s for t in traces for s in t.steps]
        engine = {part: median_of(steps, part) for part in PARTS}
        context = round(statistics.fmean(t.context_tokens for t in traces))
        step, parts = profile_parts(m, batch, context)
        per_run = [t.median(GEMMS) for t in traces]
        itl = statistics.fmean(t.itl_seconds for t in traces)
        rows.append(
            f"| {batch} | {ms(itl)} | {ms(median_of(steps))} | {ms(step)} | {ms(engine[GEMMS])} | "
            f"{ms(parts[GEMMS])} | {parts[GEMMS] / engine[GEMMS]:.2f} | "
            f"{per_run[0] / per_run[-1]:.2f} | {ms(engine['lm_head'])} / {ms(parts['lm_head'])} | "
            f"{ms(engine['attention'])} / {ms(parts['attention'])} | "
            f"{ms(engine['sampler'] + engine['rest'])} / {ms(parts['rest'])} |"
        )
    return rows


def measure(
    name: str, config: dict[str, Any], batches: Sequence[int], work: Path
) -> tuple[list[dict[int, BatchTrace]], ModelMeasurements, str]:
    traces = work / "traces"
    traces.mkdir(parents=True)
    profiler_config = {
        "profiler": "torch",
        "torch_profiler_dir": str(traces),
        "torch_profiler_with_stack": False,
        "torch_profiler_record_shapes": True,
        "torch_profiler_use_gzip": False,
    }
    flags = SERVE_FLAGS.get(name, ())
    serve = (*flags, "--profiler-config", json.dumps(profiler_config))
    config_path = work / "config.json"
    config_path.write_text(json.dumps(config, indent=2))
    runs: list[dict[int, BatchTrace]] = [{}, {}]
    with served(config, work / "vllm", max(batches), PROMPT + 2 * DECODE_STEPS, serve) as server:
        print(f"[{stamp()}] vLLM ready in {server.start_seconds:.0f} s", flush=True)
        for run, label in zip(runs, ("run 1", "run 2"), strict=True):
            if label == "run 2":
                contexts = (round(statistics.fmean(t.context_tokens for t in runs[0].values())),)
                _, wall, command = predict(
                    config_path, tuple(batches), contexts, False, None, "cpu", "bfloat16",
                    flags, python=str(server.python),
                )  # fmt: skip
                print(f"[{stamp()}] profiled in {wall:.0f} s", flush=True)
            for batch in batches:
                run[batch] = trace_batch(server, batch, traces)
                t = run[batch]
                print(
                    f"[{stamp()}] {label} B={batch}: ITL {ms(t.itl_seconds)}, traced step "
                    f"{ms(t.median())}, GEMMs {ms(t.median(GEMMS))} "
                    f"({len(t.steps)} steps; load {load_average():.1f})",
                    flush=True,
                )
    result = ProfileResult.from_dict(json.loads((work / "result.json").read_text()))
    (measured,) = result.devices[0].model_measurements
    return runs, measured, command


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", choices=sorted(SETS), default="quantized")
    parser.add_argument("--only", action="append", help="configurations (default: every one)")
    parser.add_argument("--batches", default=",".join(map(str, BATCHES)))
    parser.add_argument("--out", help="the record (default results/vllm-trace-<cpu>.md)")
    args = parser.parse_args()
    configs = SETS[args.set]
    names = args.only or sorted(configs)
    unknown = sorted(set(names) - set(configs))
    if unknown:
        parser.error(f"unknown configuration {unknown[0]!r}; one of {', '.join(sorted(configs))}")
    batches = tuple(int(b) for b in args.batches.split(","))
    started = dt.datetime.now(dt.UTC)
    cpu = cpu_model()
    lines = [
        f"# vLLM's step from inside the engine against the profile's parts ({args.set})",
        "",
        f"Measured {started.isoformat(timespec='seconds')} on {cpu} "
        f"({len(os.sched_getaffinity(0))} logical CPUs), {engine_identity()}.",
        "",
        f"Command: `python bench/vllm_trace.py --set {args.set} "
        + " ".join(f"--only {n}" for n in names)
        + f" --batches {args.batches}`; prompts of {PROMPT} tokens; each batch's worker traced "
        f"for {TRACE_SECONDS:.0f} s in its steady decode window, in two runs around the profile.",
        "",
    ]
    for name in names:
        with tempfile.TemporaryDirectory(prefix="vllm-trace-") as tmp:
            runs, measured, command = measure(name, configs[name], batches, Path(tmp))
        lines += [f"Profile: `{command}`", "", *table(name, runs, measured), ""]
    slug = cpu_slug(cpu)
    out = Path(args.out or Path(__file__).parent / "results" / f"vllm-trace-{args.set}-{slug}.md")
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
