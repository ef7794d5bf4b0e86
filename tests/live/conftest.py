"""The live suite's parts, once per module: a real vLLM (scripts/vllm-cpu.sh, tests/vllm_server.py)
serving a random-weight model in a CPU budget of its own, its calibration, waves of load, the
operator's metrics for the calibrated ITL model (rendered by the operator's own metrics code) with
a kube-state-metrics stand-in, and a real Prometheus server running the project's rules against
all of them.

Every part is skipped with its reason where it cannot run (no Linux, no ``prometheus``, no cgroup
CPU controller, no root, no PyPI for the first install) and stopped by its PID at the end; the
teardown checks that no process of the engine is left and that the cgroup is gone.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import statistics
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests import vllm_server
from tests.live.cpu_budget import CpuBudget, unavailable_reason
from tests.live.exposition import (
    KUBE_STATE_METRICS_PATH,
    OPERATOR_PATH,
    FixedExposition,
    ItlModel,
    ServingPod,
)
from tests.prometheus_server import (
    MISSING_REASON,
    PROMETHEUS,
    PrometheusServer,
    ScrapeTarget,
    port_is_free,
    rules_copy,
)

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "observability" / "prometheus" / "rules" / "roofline.rules.yaml"
ALERT = "RooflinePlanDrift"

#: A Llama-architecture model of 21 M parameters: big enough that its decode step is mostly
#: compute (so a CPU budget cut slows it), small enough to start in a minute or two.
MODEL_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 512,
    "intermediate_size": 1536,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "vocab_size": 8192,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-5,
}
#: ITL buckets 5% apart from 1 ms to about 3 s: the resolution docs/deploy.md recommends, so a
#: median reads within ±2.5% instead of the default buckets' up to ±20%.
ITL_BUCKETS = [round(0.001 * 1.05**i, 6) for i in range(165)]
#: The engine's CPU quota (cores) when its CPU is cut; unthrottled it has none (the weight of its
#: budget keeps its one core its own).
CUT_CPUS = 0.15
#: The load: sequences decoding at once, prompt and generated tokens of each request (a wave
#: decodes 600 steps: about 6 s at the engine's step of about 9 ms on its core).
BATCH = 8
PROMPT_TOKENS = 128
GENERATED_TOKENS = 600
#: The engine's context limit: room for requests that outlast the rules' window when its CPU is
#: cut (test_live_drift's slow engine generates up to it).
MAX_MODEL_LEN = 2048
#: The rules' windows and the alert's patience in the test's copy of the rules file.
WINDOW = "30s"
ALERT_FOR = "15s"
SCRAPE_INTERVAL = "2s"


@dataclass(frozen=True)
class Engine:
    server: vllm_server.VllmServer
    budget: CpuBudget


@dataclass
class WaveLoad:
    """The load: waves of :data:`BATCH` requests started together, one after another, each
    measured by the harness (``vllm_server.measure_decode``: the engine's own inter-token latency
    over the wave's decode-only steps at exactly that batch). Prometheus sees the same waves."""

    server: vllm_server.VllmServer
    batch: int
    stop: threading.Event = field(default_factory=threading.Event)
    #: Set to hold the waves back (:meth:`paused`); ``idle`` is set once no wave runs.
    hold: threading.Event = field(default_factory=threading.Event)
    idle: threading.Event = field(default_factory=threading.Event)
    errors: list[BaseException] = field(default_factory=list)
    #: ``(monotonic end time, window)`` of every wave measured.
    windows: list[tuple[float, vllm_server.DecodeWindow]] = field(default_factory=list)

    def run(self) -> Iterator[WaveLoad]:
        thread = threading.Thread(target=self._waves, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.stop.set()
            thread.join(timeout=900)

    @contextlib.contextmanager
    def paused(self, timeout: float = 120) -> Iterator[None]:
        """No wave from entering to leaving: the wave under way ends first."""
        self.idle.clear()
        self.hold.set()
        try:
            if not self.idle.wait(timeout):
                raise AssertionError(f"the wave under way did not end in {timeout} s")
            yield
        finally:
            self.hold.clear()

    def _waves(self) -> None:
        seed = 1
        while not self.stop.is_set():
            if self.hold.is_set():
                self.idle.set()
                time.sleep(0.2)
                continue
            try:
                window = wave(self.server, self.batch, seed)
                self.windows.append((time.monotonic(), window))
            except AssertionError:
                pass  # a wave without a steady window (its requests still count as load)
            except BaseException as error:
                self.errors.append(error)
                return
            seed += 1

    def since(self, start: float) -> list[vllm_server.DecodeWindow]:
        """The waves that ended after ``start`` (monotonic seconds)."""
        return [w for at, w in self.windows if at >= start]


def wave(server: vllm_server.VllmServer, batch: int, seed: int) -> vllm_server.DecodeWindow:
    """One wave: ``batch`` requests of :data:`PROMPT_TOKENS` started together, each generating
    :data:`GENERATED_TOKENS`; the engine's decode-only ITL over it."""
    return vllm_server.measure_decode(server, batch, PROMPT_TOKENS, GENERATED_TOKENS, seed)


def _skip_reason() -> str | None:
    return (
        vllm_server.available()
        or (None if PROMETHEUS else MISSING_REASON)
        or (unavailable_reason())
    )


def model_directory(environment: Path) -> Path:
    """The model under the engine's cache, at a path of its config's digest: the compile cache
    of vLLM keys on it, so a second run on the machine starts faster."""
    digest = hashlib.sha256(json.dumps(MODEL_CONFIG, sort_keys=True).encode()).hexdigest()[:16]
    return vllm_server.write_model(environment / "models" / f"live-{digest}", MODEL_CONFIG)


def engine_core() -> int:
    """The core the engine is pinned to: the first this process may run on."""
    return min(os.sched_getaffinity(0))


def pin(pids: list[int], core: int) -> None:
    """Every thread of ``pids`` on ``core`` (threads started later inherit it)."""
    for pid in pids:
        for thread in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(ProcessLookupError):
                os.sched_setaffinity(int(thread), {core})


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """vLLM serving the model on one core (its OpenMP thread bound there, every thread of it
    pinned), every process of it in a CPU budget whose weight keeps that core its own."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    try:
        environment = vllm_server.install()
    except vllm_server.VllmUnavailable as error:
        pytest.skip(str(error))
    settings = vllm_server.ServeSettings(
        max_model_len=MAX_MODEL_LEN,
        max_num_seqs=16,
        kv_cache_gib=1,
        cores=str(engine_core()),
        enforce_eager=True,
        extra_args=(
            "--custom-histogram-buckets",
            json.dumps({"inter_token_latency": ITL_BUCKETS}),
        ),
    )
    workdir = tmp_path_factory.mktemp("vllm")
    server = vllm_server.VllmServer(environment, model_directory(environment), settings, workdir)
    with server:
        print(f"vLLM ready in {server.start_seconds:.0f} s")
        budget = CpuBudget("roofline-live")
        try:
            members = server.group_members()
            pin(members, engine_core())
            budget.add(members)
            yield Engine(server, budget)
        finally:
            budget.release()
        print(f"---- vLLM log ----\n{server.log_tail(30)}")
    assert server.group_members() == [], "a process of the engine outlived its stop"
    assert not budget.path.exists()


def calibrate(server: vllm_server.VllmServer) -> tuple[ItlModel, list[vllm_server.DecodeWindow]]:
    """The engine's own decode step (the harness's decode-only windows at exactly B) in waves
    of batch 2 and :data:`BATCH`, twice each, interleaved; the ITL model through the two
    medians, the slope shared between the per-sequence and the context term."""
    windows = [wave(server, batch, 1000 + i) for i, batch in enumerate((2, BATCH, 2, BATCH))]
    small = [w for w in windows if w.batch == 2]
    large = [w for w in windows if w.batch == BATCH]
    step_small = statistics.median(w.itl_seconds for w in small)
    step_large = statistics.median(w.itl_seconds for w in large)
    context = statistics.median(w.context_tokens for w in large)
    slope = max(step_large - step_small, 0.0) / (BATCH - 2)
    per_sequence = slope / 2
    per_token = slope / 2 / context
    small_context = statistics.median(w.context_tokens for w in small)
    intercept = step_small - 2 * per_sequence - 2 * small_context * per_token
    return ItlModel(intercept, per_sequence, per_token), windows


@pytest.fixture(scope="module")
def itl_model(engine: Engine) -> ItlModel:
    model, windows = calibrate(engine.server)
    for w in windows:
        print(
            f"calibration B={w.batch}: ITL {w.itl_seconds * 1e3:.2f} ms over {w.steps} steps, "
            f"context {w.context_tokens:.0f}, load {w.load_average[0]:.1f}"
        )
    print(f"ITL model: {model}")
    return model


@pytest.fixture(scope="module")
def load(engine: Engine, itl_model: ItlModel) -> Iterator[WaveLoad]:
    """The waves, from after the calibration to the end of the module."""
    waves = WaveLoad(engine.server, BATCH)
    yield from waves.run()
    assert not waves.errors, f"requests failed: {waves.errors[:3]}"


@pytest.fixture(scope="module")
def pod() -> ServingPod:
    return ServingPod(
        namespace="serving",
        pod="vllm-0",
        node="cpu-node",
        model="model",
        context_tokens=PROMPT_TOKENS + GENERATED_TOKENS,
    )


@pytest.fixture(scope="module")
def fixed(pod: ServingPod, itl_model: ItlModel) -> Iterator[FixedExposition]:
    with FixedExposition(pod, itl_model).running() as served:
        yield served


@pytest.fixture(scope="module")
def prometheus(
    engine: Engine,
    fixed: FixedExposition,
    pod: ServingPod,
    load: WaveLoad,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[PrometheusServer]:
    """Prometheus scraping the engine (as a PodMonitor would: with the pod's namespace and
    name) and the fixed exposition, with the rules file's 5-minute windows shortened to
    :data:`WINDOW` and the drift alert's 30 minutes to :data:`ALERT_FOR`."""
    workdir = tmp_path_factory.mktemp("prometheus")
    rules = rules_copy(
        RULES,
        workdir / "rules.yaml",
        alert_for={ALERT: ALERT_FOR},
        replace={"[5m]": f"[{WINDOW}]", "[5m:]": f"[{WINDOW}:]"},
    )
    address = engine.server.url.removeprefix("http://")
    targets = [
        ScrapeTarget("vllm", [address], {"namespace": pod.namespace, "pod": pod.pod}),
        ScrapeTarget("roofline-operator", [fixed.address], metrics_path=OPERATOR_PATH),
        ScrapeTarget("kube-state-metrics", [fixed.address], metrics_path=KUBE_STATE_METRICS_PATH),
    ]
    server = PrometheusServer(
        workdir,
        targets,
        [rules],
        scrape_interval=SCRAPE_INTERVAL,
        evaluation_interval=SCRAPE_INTERVAL,
    )
    with server:
        yield server
        print(f"---- prometheus log ----\n{server.log_tail(20)}")
    assert port_is_free(server.port)
