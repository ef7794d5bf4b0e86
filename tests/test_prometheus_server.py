"""The real Prometheus server fixture: it scrapes, evaluates the project's rules, answers its HTTP
API, and leaves nothing behind."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.operator.harness.waiting import wait_for
from tests.prometheus_server import (
    MISSING_REASON,
    PROMETHEUS,
    PrometheusServer,
    ScrapeTarget,
    port_is_free,
    rules_copy,
    wait_for_alert,
)

RULES = Path(__file__).resolve().parents[1] / "observability/prometheus/rules/roofline.rules.yaml"
EXPOSITION = (
    "# TYPE roofline_node_slower_than_peers gauge\n"
    'roofline_node_slower_than_peers{profile="p",node="n",gpu_class="c"} 1\n'
)


@pytest.fixture
def exposition() -> Iterator[str]:
    """A loopback endpoint serving a fixed exposition, as ``host:port``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = EXPOSITION.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_rules_copy_shortens_an_alert_and_refuses_what_is_not_there(tmp_path: Path) -> None:
    copy = rules_copy(
        RULES,
        tmp_path / "rules.yaml",
        alert_for={"RooflineNodeSlowerThanPeers": "2s"},
        replace={"[30m]": "[1m]"},
    )
    text = copy.read_text()
    assert "for: 2s" in text
    assert "[30m]" not in text
    with pytest.raises(AssertionError, match="no alert"):
        rules_copy(RULES, tmp_path / "x.yaml", alert_for={"RooflineNoSuchAlert": "1s"})
    with pytest.raises(AssertionError, match="is not in"):
        rules_copy(RULES, tmp_path / "y.yaml", replace={"[17m]": "[1m]"})


@pytest.mark.skipif(PROMETHEUS is None, reason=MISSING_REASON)
def test_a_server_scrapes_evaluates_the_rules_alerts_and_leaves_nothing_behind(
    tmp_path: Path, exposition: str
) -> None:
    rules = rules_copy(
        RULES, tmp_path / "rules.yaml", alert_for={"RooflineNodeSlowerThanPeers": "2s"}
    )
    server = PrometheusServer(tmp_path, [ScrapeTarget("fixed", [exposition])], [rules])
    with server:
        wait_for(lambda: server.targets_up() == {"fixed": "up"}, timeout=20, what="target up")
        wait_for_alert(server, "RooflineNodeSlowerThanPeers", "pending", timeout=20, node="n")
        firing = wait_for_alert(server, "RooflineNodeSlowerThanPeers", "firing", timeout=20)
        assert firing["labels"]["gpu_class"] == "c"
        assert all(
            h.startswith("ok") or h.startswith("unknown") for h in server.rule_health().values()
        )
        pid, port = server.process.pid if server.process else 0, server.port
    assert server.process is not None
    assert server.process.poll() is not None
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
    assert port_is_free(port)
