"""A real Prometheus server for tests: started on a loopback port, with its own configuration and
storage, loading the project's rule files, stopped by PID.

The server is the distribution's ``prometheus`` binary (Debian/Ubuntu: ``apt-get install
prometheus``, which also brings ``promtool``), not an emulation: it scrapes real endpoints, runs
the recording rules and alerts on its own evaluation loop, and answers the same HTTP API
(``/api/v1/query``, ``/api/v1/alerts``) a user's Prometheus does. Tests copy the rules file and
shorten what only makes production alerts patient (``for:``, windows) with :func:`rules_copy`,
so that an alert goes pending and firing within a test's minute rather than half an hour.

Nothing is left behind: the process runs in its own session, dies with the test process, and
:meth:`PrometheusServer.stop` ends it by its PID and waits until its port is free again.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import yaml

from tests.operator.harness.commands import die_with_parent
from tests.operator.harness.processes import free_port
from tests.operator.harness.waiting import wait_for

PROMETHEUS = shutil.which("prometheus")
STOP_TIMEOUT_SECONDS = 15
READY_TIMEOUT_SECONDS = 60
#: Why a test that needs the server is skipped where it is missing.
MISSING_REASON = (
    "prometheus not found (Debian/Ubuntu: apt-get install prometheus, which .ci/run installs; "
    "or a Prometheus release tarball on PATH)"
)


@dataclass(frozen=True)
class ScrapeTarget:
    """One scrape job: its name, ``host:port`` targets and the labels Prometheus attaches (a
    PodMonitor attaches ``namespace`` and ``pod``; tests attach them here)."""

    job: str
    targets: Sequence[str]
    labels: Mapping[str, str] = field(default_factory=dict)
    metrics_path: str = "/metrics"


def rules_copy(
    source: Path,
    destination: Path,
    *,
    alert_for: Mapping[str, str] | None = None,
    replace: Mapping[str, str] | None = None,
) -> Path:
    """``source`` rewritten for a test: each alert of ``alert_for`` gets that ``for:``, and each
    text of ``replace`` (a window such as ``[30m]``) is replaced everywhere; every replaced
    text must occur, so a renamed rule fails the test instead of silently keeping its window."""
    text = source.read_text()
    for old, new in (replace or {}).items():
        if old not in text:
            raise AssertionError(f"{old!r} is not in {source.name}")
        text = text.replace(old, new)
    document = yaml.safe_load(text)
    pending = dict(alert_for or {})
    for group in document["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") in pending:
                rule["for"] = pending[rule["alert"]]
    missing = {name for name in pending if not _has_alert(document, name)}
    if missing:
        raise AssertionError(f"no alert {sorted(missing)} in {source.name}")
    destination.write_text(yaml.safe_dump(document, sort_keys=False))
    return destination


def _has_alert(document: Mapping[str, Any], name: str) -> bool:
    return any(rule.get("alert") == name for g in document["groups"] for rule in g["rules"])


class PrometheusServer:
    """One ``prometheus`` process on ``127.0.0.1``: its config, its storage, its HTTP API."""

    def __init__(
        self,
        workdir: Path,
        targets: Sequence[ScrapeTarget],
        rule_files: Sequence[Path] = (),
        *,
        scrape_interval: str = "1s",
        evaluation_interval: str = "1s",
    ) -> None:
        if PROMETHEUS is None:
            raise RuntimeError(MISSING_REASON)
        self.workdir = workdir
        self.targets = list(targets)
        self.rule_files = list(rule_files)
        self.scrape_interval = scrape_interval
        self.evaluation_interval = evaluation_interval
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / "prometheus.log"
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def config(self) -> dict[str, Any]:
        return {
            "global": {
                "scrape_interval": self.scrape_interval,
                "scrape_timeout": self.scrape_interval,
                "evaluation_interval": self.evaluation_interval,
            },
            "rule_files": [str(p) for p in self.rule_files],
            "scrape_configs": [
                {
                    "job_name": t.job,
                    "metrics_path": t.metrics_path,
                    "static_configs": [{"targets": list(t.targets), "labels": dict(t.labels)}],
                }
                for t in self.targets
            ],
        }

    def start(self) -> PrometheusServer:
        assert PROMETHEUS is not None
        config = self.workdir / "prometheus.yml"
        config.write_text(yaml.safe_dump(self.config(), sort_keys=False))
        self.port = free_port()
        self._log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=1d",
                f"--web.console.templates={self.workdir / 'consoles'}",
                f"--web.console.libraries={self.workdir / 'console_libraries'}",
            ],
            cwd=self.workdir,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        wait_for(self._ready, timeout=READY_TIMEOUT_SECONDS, what="Prometheus's /-/ready")
        return self

    def _ready(self) -> bool:
        if self.process is None or self.process.poll() is not None:
            raise AssertionError(f"prometheus exited early:\n{self.log_tail()}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as rsp:
                return bool(rsp.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def stop(self) -> None:
        """SIGTERM by PID (the server flushes and exits), SIGKILL if it does not; then wait until
        the port is free, so the next server can take it."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=STOP_TIMEOUT_SECONDS)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    def _get(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=10) as rsp:
            body = json.loads(rsp.read().decode())
        if body.get("status") != "success":
            raise AssertionError(f"{path} {params}: {body}")
        return body["data"]

    def query(self, expr: str) -> list[tuple[dict[str, str], float]]:
        """An instant query's vector as ``(labels, value)`` pairs."""
        data = self._get("/api/v1/query", query=expr)
        return [(dict(r["metric"]), float(r["value"][1])) for r in data["result"]]

    def value(self, expr: str) -> float | None:
        """The one value of an instant query; ``None`` when the vector is empty."""
        found = self.query(expr)
        if len(found) > 1:
            raise AssertionError(f"{expr} has {len(found)} series: {found}")
        return found[0][1] if found else None

    def alerts(self, name: str | None = None) -> list[dict[str, Any]]:
        """The server's active alerts (pending or firing), optionally of one name."""
        found: list[dict[str, Any]] = self._get("/api/v1/alerts")["alerts"]
        return [a for a in found if name is None or a["labels"].get("alertname") == name]

    def rule_health(self) -> dict[str, str]:
        """Each loaded rule's health (``ok``, ``err``, ``unknown``) and last error, by name."""
        health = {}
        for group in self._get("/api/v1/rules")["groups"]:
            for rule in group["rules"]:
                health[rule["name"]] = f"{rule['health']} {rule.get('lastError', '')}".strip()
        return health

    def targets_up(self) -> dict[str, str]:
        """Each scrape target's health by job."""
        active = self._get("/api/v1/targets")["activeTargets"]
        return {t["labels"]["job"]: t["health"] for t in active}

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


def wait_for_alert(
    server: PrometheusServer, name: str, state: str, timeout: float, **labels: str
) -> dict[str, Any]:
    """The first alert ``name`` in ``state`` (``pending``, ``firing``) whose labels include
    ``labels``."""

    def found() -> dict[str, Any] | None:
        for alert in server.alerts(name):
            have = alert["labels"]
            if alert["state"] == state and all(have.get(k) == v for k, v in labels.items()):
                return alert
        return None

    return wait_for(found, timeout=timeout, what=f"{name} {state} {labels}", interval=0.5)


def port_is_free(port: int) -> bool:
    """Whether nothing listens on ``127.0.0.1:port`` any more."""
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0
