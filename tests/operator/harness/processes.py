"""The real processes a test drives: ``roofline operator`` and ``kubectl``, pointed at the emulator.

The operator runs as a separate process, exactly as ``roofline operator`` in a terminal, logging in
through ``KUBECONFIG``; tests see it only through the API, its ``/metrics`` and ``/healthz``, and
its log file. It runs in its own process group, so stopping it (or killing it mid-round for
the restart test) never touches anything else.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from .commands import die_with_parent, product_environment, roofline_argv
from .waiting import wait_for

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
STOP_TIMEOUT_SECONDS = 15


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def stop_group(process: subprocess.Popen[Any], timeout: float) -> None:
    """SIGTERM to a started process's group, SIGKILL when it outlives ``timeout`` seconds."""
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=timeout)


class OperatorProcess:
    """One ``roofline operator`` process against a kubeconfig, with its metrics port."""

    def __init__(
        self,
        kubeconfig: Path,
        workdir: Path,
        namespace: str = "default",
        extra_args: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.workdir = workdir
        self.namespace = namespace
        self.extra_args = list(extra_args)
        self.env = env or {}
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / "operator.log"
        self._log: IO[bytes] | None = None
        self.starts = 0

    def argv(self) -> list[str]:
        return [
            *roofline_argv(),
            "operator",
            "--standalone",
            "--metrics-host",
            "127.0.0.1",
            "--metrics-port",
            str(self.port),
            "--namespace",
            self.namespace,
            *self.extra_args,
        ]

    def start(self, wait: bool = True) -> OperatorProcess:
        self.port = free_port()
        self.starts += 1
        self._log = self.log_path.open("ab")
        self._log.write(f"---- start #{self.starts}: {' '.join(self.argv())}\n".encode())
        self._log.flush()
        self.process = subprocess.Popen(
            self.argv(),
            env=product_environment({"KUBECONFIG": str(self.kubeconfig), **self.env}),
            cwd=self.workdir,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        if wait:
            self.wait_healthy()
        return self

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_healthy(self, timeout: float = 60) -> None:
        def healthy() -> bool:
            if not self.running:
                raise AssertionError(f"the operator exited early:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{self.port}/healthz", timeout=2
                ) as rsp:
                    return bool(rsp.status == 200)
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                return False

        wait_for(healthy, timeout=timeout, what="the operator's /healthz to answer 200")

    def probe(self, path: str) -> tuple[int, str]:
        """``(status, body)`` of a GET of the operator's ``path`` (``/healthz``, ``/readyz``)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as rsp:
                return int(rsp.status), rsp.read().decode()
        except urllib.error.HTTPError as error:
            with error:
                return int(error.code), error.read().decode()

    def metrics_text(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as rsp:
            return str(rsp.read().decode())

    def samples(self, name: str) -> list[tuple[dict[str, str], float]]:
        """Every sample named ``name`` in one scrape, as (labels, value)."""
        found = []
        for family in text_string_to_metric_families(self.metrics_text()):
            for sample in family.samples:
                if sample.name == name:
                    found.append((dict(sample.labels), float(sample.value)))
        return found

    def sample(self, name: str, **labels: str) -> float | None:
        for have, value in self.samples(name):
            if all(have.get(k) == v for k, v in labels.items()):
                return value
        return None

    def peak_rss_bytes(self) -> int:
        """``VmHWM`` of the live process: the peak resident set size so far."""
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("VmHWM is not reported by this kernel")

    def kill(self) -> None:
        """SIGKILL, as when a node dies or the pod is evicted: no graceful shutdown at all."""
        if self.process is not None and self.running:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=STOP_TIMEOUT_SECONDS)
        self._close_log()

    def stop(self) -> int | None:
        if self.process is None:
            return None
        if self.running:
            stop_group(self.process, STOP_TIMEOUT_SECONDS)
        self._close_log()
        return self.process.returncode

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


#: What the ``start_operator`` fixture hands a test: start an operator against a cluster.
OperatorFactory = Callable[..., OperatorProcess]


class Kubectl:
    """The real ``kubectl`` with its own home and discovery cache, talking to one cluster."""

    def __init__(self, kubeconfig: Path, workdir: Path, binary: Path | str = KUBECTL) -> None:
        if not Path(binary).exists():
            raise RuntimeError("kubectl is not installed; the operator's integration tests need it")
        self.binary = str(binary)
        self.kubeconfig = kubeconfig
        self.home = workdir / "kubectl-home"
        self.home.mkdir(parents=True, exist_ok=True)

    def __call__(
        self, *args: str, check: bool = True, stdin: str | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        env = {
            "KUBECONFIG": str(self.kubeconfig),
            "HOME": str(self.home),
            "PATH": os.environ["PATH"],
        }
        result = subprocess.run(
            [self.binary, *args],
            env=env,
            capture_output=True,
            text=True,
            input=stdin,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} failed ({result.returncode}):\n"
                f"{result.stdout}{result.stderr}"
            )
        return result

    def json(self, *args: str) -> Any:
        return yaml.safe_load(self(*args, "-o", "json").stdout)

    def table(self, *args: str) -> list[dict[str, str]]:
        """``kubectl get`` output as rows keyed by the printed column headers."""
        lines = [line for line in self("get", *args).stdout.splitlines() if line.strip()]
        if not lines:
            return []
        header = lines[0]
        starts = [
            i for i, ch in enumerate(header) if ch != " " and (i == 0 or header[i - 1] == " ")
        ]
        names = header.split()
        rows = []
        for line in lines[1:]:
            cells = [line[s:e].strip() for s, e in zip(starts, [*starts[1:], None], strict=True)]
            rows.append(dict(zip(names, cells, strict=True)))
        return rows
