"""The control-plane harness leaves nothing running when a part fails: a ``with`` block's exit
does not run when its entry raises, and a process left behind outlives the test session (pytest
turns the leaked log file and process into errors when it collects them)."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest
from tests.operator.harness.controlplane import ControlPlane

#: Answers etcd's /health as healthy on the port of its --listen-client-urls.
FAKE_ETCD = """\
import http.server, sys
url = next(a for a in sys.argv if a.startswith("--listen-client-urls="))
port = int(url.rsplit(":", 1)[1])
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'{"health":"true"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *_):
        pass
http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""


def stand_in(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def binaries(tmp_path: Path) -> Path:
    """A healthy stand-in etcd and a kube-apiserver that exits at once."""
    directory = tmp_path / "bin"
    directory.mkdir()
    stand_in(directory / "etcd", f"#!{sys.executable}\n{FAKE_ETCD}")
    stand_in(directory / "kube-apiserver", "#!/bin/sh\necho 'no such flag' >&2\nexit 1\n")
    return directory


def test_an_api_server_that_fails_to_start_stops_the_etcd_started_before_it(
    binaries: Path, tmp_path: Path
) -> None:
    plane = ControlPlane(binaries, tmp_path / "plane")
    with pytest.raises(AssertionError, match="kube-apiserver exited"), plane:
        pass
    assert plane.etcd.process is not None
    assert plane.etcd.process.returncode is not None
    assert plane.etcd._log is None
    assert plane.apiserver._log is None


def test_stopping_stops_etcd_even_where_stopping_the_api_server_fails(
    binaries: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plane = ControlPlane(binaries, tmp_path / "plane")
    plane.etcd.start()

    def fails() -> None:
        raise TimeoutError("the API server outlived its SIGKILL")

    monkeypatch.setattr(plane.apiserver, "stop", fails)
    with pytest.raises(TimeoutError):
        plane.stop()
    assert plane.etcd.process is not None
    assert plane.etcd.process.returncode is not None
    assert plane.etcd._log is None
