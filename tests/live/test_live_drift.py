"""The plan-drift rules on a real engine's series in a real Prometheus.

A real vLLM decodes waves of requests; Prometheus scrapes it, the operator's metrics for an ITL
model calibrated on the same engine in the same CPU budget (rendered by the operator's own metrics
code) and a kube-state-metrics stand-in, and runs the project's rules file with its windows and
the alert's patience shortened. Checked through Prometheus's HTTP API:

1. on the engine as calibrated, ``roofline:model_itl_ratio`` is near 1 and ``RooflinePlanDrift``
   stays silent;
2. with the engine's CPU budget cut, the alert goes pending, then firing; restored, it resolves;
3. slowed while its requests are far from done, so that none finishes for longer than the rules'
   window, the engine keeps the alert firing (the live context is the KV cache in use, not the
   tokens of finished requests);
4. a wrong prediction (the ITL model halved: live reads twice the prediction) fires it; a
   pessimistic one (doubled) keeps it silent.

The margins are measured, not hoped for (docs/testing-operator.md, "The live suite").
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from typing import Any

import pytest

from tests import vllm_server
from tests.live.conftest import (
    ALERT,
    ALERT_FOR,
    BATCH,
    CUT_CPUS,
    MAX_MODEL_LEN,
    PROMPT_TOKENS,
    WINDOW,
    Engine,
    WaveLoad,
)
from tests.live.exposition import FixedExposition, ItlModel
from tests.operator.harness.waiting import wait_for
from tests.prometheus_server import PrometheusServer, wait_for_alert

pytestmark = [pytest.mark.live, pytest.mark.timeout(3600)]

RATIO = "roofline:model_itl_ratio"
#: How far the live ratio of the engine as calibrated may sit from 1 (measured spread plus the
#: difference between steady-window and live-load steps: docs/testing-operator.md).
NEAR_ONE = 0.25
#: How far the rules' live step (the ITL histogram's median over the window) may sit from the
#: harness's decode-only step over the same waves (measured: docs/testing-operator.md).
SAME_STEP = 0.15
#: The rules file's threshold.
THRESHOLD = 1.3
#: Seconds between two samples of the ratio, and the alert's patience in the test's rules.
SAMPLE_SECONDS = 2
ALERT_SECONDS = int(ALERT_FOR.rstrip("s"))
#: A window of the rules fully refilled after a change, plus two scrapes.
SETTLE_SECONDS = 30 + 4
WINDOW_SECONDS = int(WINDOW.rstrip("s"))
#: How long the slow engine's alert must stay firing with no request finishing: longer than the
#: rules' window, so every window read in that time holds no finished request.
HOLD_SECONDS = WINDOW_SECONDS + 15
#: Tokens each of the slow engine's requests generates (``ignore_eos``): as many as its context
#: allows. With its CPU cut a step takes 60-100 ms, so they last 110 s or more, longer than the
#: alert takes to fire plus the hold.
LONG_TOKENS = MAX_MODEL_LEN - PROMPT_TOKENS - 8


def ratios(prometheus: PrometheusServer, seconds: float) -> list[float]:
    """``roofline:model_itl_ratio`` of the one serving pod, every 2 s for ``seconds``.

    A NaN would be no ratio (the rules never record one: a window without a decode step has no
    live ITL, and the live context does not depend on requests finishing).
    """
    found = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = prometheus.value(RATIO)
        if value is not None and not math.isnan(value):
            found.append(value)
        time.sleep(SAMPLE_SECONDS)
    return found


def longest_run_at_or_above(values: list[float], threshold: float) -> int:
    """The most consecutive values at or above ``threshold``."""
    longest = current = 0
    for value in values:
        current = current + 1 if value >= threshold else 0
        longest = max(longest, current)
    return longest


def drift_alerts(prometheus: PrometheusServer) -> list[dict[str, Any]]:
    return prometheus.alerts(ALERT)


def alert_reached(prometheus: PrometheusServer, state: str, timeout: float) -> dict[str, Any]:
    """The drift alert of the pod in ``state``; on a timeout, the targets' health and the
    ratio are in the message."""
    try:
        return wait_for_alert(prometheus, ALERT, state, timeout=timeout, pod="vllm-0")
    except AssertionError as error:
        raise AssertionError(
            f"{error}; targets {prometheus.targets_up()}, ratio {prometheus.value(RATIO)}"
        ) from None


def wait_for_ratio(prometheus: PrometheusServer) -> float:
    return wait_for(lambda: prometheus.value(RATIO), timeout=180, what=RATIO, interval=1)


def test_the_ratio_is_near_one_on_the_engine_as_planned_and_the_alert_stays_silent(
    prometheus: PrometheusServer, load: WaveLoad
) -> None:
    wait_for_ratio(prometheus)
    time.sleep(SETTLE_SECONDS)
    start = time.monotonic() - 30
    found, live = [], []
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        ratio = prometheus.value(RATIO)
        step = prometheus.value("roofline:serving_itl_seconds")
        if ratio is not None and step is not None and not math.isnan(ratio):
            found.append(ratio)
            live.append(step)
        time.sleep(SAMPLE_SECONDS)
    engine_steps = [w.itl_seconds for w in load.since(start)]
    print(f"ratios as planned: {[round(r, 3) for r in found]}")
    print(
        f"live ITL by the rules {statistics.median(live) * 1e3:.2f} ms, by the harness over the "
        f"same waves {[round(s * 1e3, 2) for s in engine_steps]} ms"
    )
    assert len(found) >= 10
    # The rules' live step (the histogram's median) is the engine's own decode step.
    assert engine_steps
    assert abs(statistics.median(live) / statistics.median(engine_steps) - 1) < SAME_STEP
    # And against the calibration a minute before, on a shared machine: near one.
    assert abs(statistics.median(found) - 1) < NEAR_ONE, found
    # Below the alert's threshold but for a stretch shorter than the alert's patience: on a shared
    # VM the engine itself ran up to 30% slow for a few seconds (the harness's steps read 16.8 ms
    # against 12.8), and the ratio read 1.31-1.34 for four samples before settling near 1.02,
    # which is what the alert's `for` exists to ignore.
    assert longest_run_at_or_above(found, THRESHOLD) * SAMPLE_SECONDS < ALERT_SECONDS, found
    assert drift_alerts(prometheus) == []
    health = prometheus.rule_health()
    assert all(h == "ok" for h in health.values()), health
    assert prometheus.value("roofline:model_itl_predicted_seconds") is not None


def test_a_slowed_engine_fires_pending_then_firing_and_resolves_when_restored(
    prometheus: PrometheusServer, engine: Engine
) -> None:
    engine.budget.set_cpus(CUT_CPUS)
    try:
        pending = alert_reached(prometheus, "pending", timeout=180)
        firing = alert_reached(prometheus, "firing", timeout=120)
        print(f"slowed: pending at ratio {pending['value']}, firing at {firing['value']}")
    finally:
        engine.budget.set_cpus(None)
    labels = firing["labels"]
    assert (labels["engine"], labels["model"], labels["node"]) == ("vllm", "model", "cpu-node")
    assert "slower than its plan" in firing["annotations"]["summary"]
    wait_for(lambda: drift_alerts(prometheus) == [], timeout=180, what="the alert to resolve")
    restored = ratios(prometheus, 10)
    assert restored
    assert max(restored) < THRESHOLD, restored


def test_a_slow_engine_whose_requests_do_not_finish_stays_firing(
    prometheus: PrometheusServer, engine: Engine, load: WaveLoad
) -> None:
    """The waves held back, :data:`BATCH` requests of :data:`LONG_TOKENS` start on the cut engine:
    the alert fires, and stays firing for longer than the rules' window while not one request
    finishes; the finished requests' context is then absent, and the ratio is not."""
    server = engine.server
    errors: list[BaseException] = []

    def one(prompt: list[int]) -> None:
        try:
            server.complete(prompt, LONG_TOKENS)
        except BaseException as error:  # reported below
            errors.append(error)

    prompts = vllm_server.prompts(BATCH, PROMPT_TOKENS, 7000, server.vocab_size)
    threads = [threading.Thread(target=one, args=(p,), daemon=True) for p in prompts]
    held: list[tuple[float, str, float | None, float | None]] = []
    with load.paused():
        finished = server.metrics().finished_requests
        engine.budget.set_cpus(CUT_CPUS)
        try:
            for thread in threads:
                thread.start()
            firing = alert_reached(prometheus, "firing", timeout=150)
            start = time.monotonic()
            while (elapsed := time.monotonic() - start) < HOLD_SECONDS:
                states = [a["state"] for a in drift_alerts(prometheus)]
                context = prometheus.value("roofline:serving_context_tokens")
                held.append((round(elapsed), ",".join(states), prometheus.value(RATIO), context))
                assert server.metrics().finished_requests == finished, (
                    f"a request finished while the alert was held (raise LONG_TOKENS): {held}"
                )
                assert states == ["firing"], held
                time.sleep(SAMPLE_SECONDS)
            without_finished = prometheus.query("roofline:serving_finished_context_tokens")
        finally:
            engine.budget.set_cpus(None)
        for thread in threads:
            thread.join(timeout=600)
    print(f"slow, nothing finishing: firing at ratio {firing['value']}, then {held}")
    assert not errors, errors[:3]
    assert without_finished == [], "a finished request counted in the last window"
    ratios_held = [ratio for _, _, ratio, _ in held]
    assert all(r is not None and r > THRESHOLD for r in ratios_held), held
    # The running sequences grew while the alert was held: the live context followed them.
    contexts = [c for _, _, _, c in held if c is not None]
    assert contexts, held
    assert contexts[-1] > contexts[0], held
    wait_for(lambda: drift_alerts(prometheus) == [], timeout=180, what="the alert to resolve")


def test_a_wrong_prediction_fires_and_a_pessimistic_one_stays_silent(
    prometheus: PrometheusServer, fixed: FixedExposition, itl_model: ItlModel
) -> None:
    fixed.set_model(itl_model.scaled(0.5))
    try:
        alert_reached(prometheus, "pending", timeout=120)
        firing = alert_reached(prometheus, "firing", timeout=120)
        assert float(firing["value"]) > THRESHOLD
        fixed.set_model(itl_model.scaled(2.0))
        wait_for(lambda: drift_alerts(prometheus) == [], timeout=60, what="the alert to resolve")
        # Longer than the alert's for: with the ratio near one half, nothing goes pending.
        found = ratios(prometheus, 2 * ALERT_SECONDS + 4)
        print(f"ratios with the prediction doubled: {[round(r, 3) for r in found]}")
        assert found
        assert statistics.median(found) < 1 - NEAR_ONE, found
        assert max(found) < THRESHOLD, found
        assert drift_alerts(prometheus) == []
    finally:
        fixed.set_model(itl_model)
