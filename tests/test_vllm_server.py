"""The real-engine harness's own logic, without an engine: reading vLLM's metrics, finding the
steady decode window, sizing a run, and the command line and environment it serves with."""

from __future__ import annotations

import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from tests.vllm_server import (
    INSTALL_SCRIPT,
    DecodeWindow,
    MetricsSample,
    ServeSettings,
    decode_tokens_needed,
    prompts,
    steady_window,
    write_model,
)

#: What vLLM 0.32.0 (CPU build) exported after one run: 4 requests of 512 prompt tokens and 33
#: generated tokens each.
EXPOSITION = Path(__file__).parent / "engine" / "vllm-0.32.0-metrics.txt"


def test_the_engines_own_exposition_reads_into_the_series_the_window_needs() -> None:
    sample = MetricsSample.parse(EXPOSITION.read_text(), at=5.0)
    assert sample.at == 5.0
    assert (sample.running, sample.waiting, sample.preemptions) == (0, 0, 0)
    assert sample.prompt_tokens == 4 * 512
    assert sample.generation_tokens == 4 * 33
    assert sample.iteration_tokens_sum == 4 * 512 + 4 * 33
    assert sample.iteration_tokens_count == 34
    assert sample.itl_count == 4 * 32
    assert sample.itl_sum == pytest.approx(94.64367935799987)


def run_of(
    batch: int, prefill_steps: int, decode_steps: int, step: float, poll: float
) -> list[MetricsSample]:
    """Samples of a run polled every ``poll`` s: ``prefill_steps`` steps of 512 prompt tokens in
    which one more sequence starts decoding each step, then ``decode_steps`` steps of ``batch``
    tokens taking ``step`` seconds each, then the sequences finish one per step."""
    events: list[tuple[float, int, int, int]] = []  # (end time, prompt, generated, running)
    t = 0.0
    for i in range(prefill_steps):
        t += 3 * step
        events.append((t, 512, i, min(batch, i + 1)))
    for _ in range(decode_steps):
        t += step
        events.append((t, 0, batch, batch))
    for left in range(batch - 1, -1, -1):
        t += step
        events.append((t, 0, left + 1, left))
    samples = []
    at = 0.0
    totals = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]  # prompt, generated, count, sum, itl count, itl sum
    waiting = float(batch)
    running = 0.0
    done = 0
    while at <= t + poll:
        while done < len(events) and events[done][0] <= at:
            _, prompt, generated, running_now = events[done]
            totals[0] += prompt
            totals[1] += generated
            totals[2] += 1
            totals[3] += prompt + generated
            totals[4] += generated
            totals[5] += generated * step
            running = float(running_now)
            waiting = max(0.0, batch - running) if done < prefill_steps else 0.0
            done += 1
        samples.append(MetricsSample(at, running, waiting, *totals[:6], preemptions=0.0))
        at += poll
    return samples


def test_the_window_is_the_decode_only_stretch_at_the_batch_and_its_latency_the_engines() -> None:
    samples = run_of(batch=4, prefill_steps=4, decode_steps=40, step=0.1, poll=0.5)
    window = steady_window(samples, 4, prompt_tokens=512, max_tokens=48)
    assert isinstance(window, DecodeWindow)
    assert window.itl_seconds == pytest.approx(0.1)
    assert window.itl_median_seconds == pytest.approx(0.1)
    assert window.wall_step_seconds == pytest.approx(0.1, rel=0.05)
    # The window ends before any sequence does.
    assert 30 <= window.steps <= 40
    assert 512 < window.context_tokens < 512 + 48


def test_a_run_with_no_step_at_the_whole_batch_has_no_window() -> None:
    samples = run_of(batch=4, prefill_steps=4, decode_steps=0, step=0.1, poll=0.5)
    with pytest.raises(AssertionError, match="no steady decode window at batch 4"):
        steady_window(samples, 4, prompt_tokens=512, max_tokens=8)


def test_intervals_that_carry_a_prompt_chunk_are_left_out_of_the_window() -> None:
    samples = run_of(batch=2, prefill_steps=2, decode_steps=40, step=0.1, poll=0.5)
    # A prompt chunk arrives in the middle of the decode stretch (a step with prompt tokens).
    middle = len(samples) // 2
    shifted = [
        s
        if i < middle
        else replace(
            s,
            prompt_tokens=s.prompt_tokens + 100,
            iteration_tokens_sum=s.iteration_tokens_sum + 100,
        )
        for i, s in enumerate(samples)
    ]
    window = steady_window(shifted, 2, prompt_tokens=512, max_tokens=42)
    whole = steady_window(samples, 2, prompt_tokens=512, max_tokens=42)
    assert window.steps < whole.steps / 2 + 5


def test_max_tokens_covers_the_prefill_of_every_prompt_and_the_wanted_window() -> None:
    # 64 prompts of 512 tokens in chunks of 2048: 16 steps in which some sequences already decode.
    assert decode_tokens_needed(64, 512, window_steps=30, chunk=2048) == 16 + 30 + 2
    assert decode_tokens_needed(1, 512, window_steps=30, chunk=2048) == 1 + 30 + 2


def test_prompts_are_distinct_token_ids_so_no_prefix_is_shared() -> None:
    drawn = prompts(8, 16, seed=3, vocab_size=500)
    assert len({tuple(p) for p in drawn}) == 8
    assert all(len(p) == 16 and all(125 <= t < 500 for t in p) for p in drawn)
    assert drawn == prompts(8, 16, seed=3, vocab_size=500)


def test_the_server_serves_random_weights_without_hub_or_tokenizer(tmp_path: Path) -> None:
    model = write_model(tmp_path / "m", {"model_type": "llama", "hidden_size": 64})
    settings = ServeSettings(max_model_len=1024, max_num_seqs=8, kv_cache_gib=2, cores="0")
    argv = settings.argv(Path("python"), model, 8000)
    assert argv[:3] == ["python", "-m", "vllm.entrypoints.openai.api_server"]
    for flag in ("--load-format", "dummy", "--skip-tokenizer-init", "--no-enable-prefix-caching"):
        assert flag in argv
    assert argv[argv.index("--max-num-seqs") + 1] == "8"
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert "--enforce-eager" not in argv
    env = settings.environment(tmp_path / "venv")
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "2"
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "0"
    assert env["HF_HUB_OFFLINE"] == "1"
    assert "VIRTUAL_ENV" not in env
    assert "PYTHONPATH" not in env
    assert '"torch_dtype": "bfloat16"' in (model / "config.json").read_text()


def test_a_benchs_extra_environment_reaches_the_server_over_what_the_harness_strips(
    tmp_path: Path,
) -> None:
    extra = (("PYTHONPATH", "/hook"), ("STEP_LOG", "/tmp/steps"))
    settings = ServeSettings(max_model_len=1024, max_num_seqs=8, extra_env=extra)
    env = settings.environment(tmp_path / "venv")
    assert env["PYTHONPATH"] == "/hook"
    assert env["STEP_LOG"] == "/tmp/steps"
    assert env["HF_HUB_OFFLINE"] == "1"


def test_the_install_script_keys_its_cache_by_version_and_refuses_unknown_arguments(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "ROOFLINE_VLLM_CPU_CACHE": str(tmp_path)}
    shown = subprocess.run(
        [str(INSTALL_SCRIPT), "--dir"], env=env, capture_output=True, text=True, check=True
    )
    assert shown.stdout.strip() == str(tmp_path / "0.32.0")
    assert not (tmp_path / "0.32.0").exists()
    refused = subprocess.run(
        [str(INSTALL_SCRIPT), "--bogus"], env=env, capture_output=True, text=True, check=False
    )
    assert refused.returncode == 2
    assert "usage" in refused.stderr


def test_an_interpreter_too_old_for_the_engine_is_a_reason_not_a_failure(tmp_path: Path) -> None:
    fake = tmp_path / "python3.9"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    env = {
        **os.environ,
        "ROOFLINE_VLLM_CPU_CACHE": str(tmp_path),
        "ROOFLINE_VLLM_PYTHON": str(fake),
    }
    result = subprocess.run(
        [str(INSTALL_SCRIPT)], env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 3
    assert "needs Python 3.11 to 3.14" in result.stderr


def test_intervals_shorter_than_a_step_do_not_cut_the_window() -> None:
    # Steps of 0.8 s polled every 0.5 s: some intervals see no step finish at all.
    samples = run_of(batch=8, prefill_steps=2, decode_steps=30, step=0.8, poll=0.5)
    window = steady_window(samples, 8, prompt_tokens=512, max_tokens=40)
    assert window.steps >= 25
    assert window.itl_seconds == pytest.approx(0.8)
