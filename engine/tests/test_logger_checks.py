"""A logger's server is asked once before any work: an unreachable MLflow tracking URI, or one
where another server answers (a web page, a plain file server), stops the run in one line within
seconds, not after minutes of silent retries or at the first call once data and model are built."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from omegaconf import OmegaConf

from engine.core import probe
from engine.runs.loggers.build import logger_problems

MLFLOW = "engine.runs.loggers.mlflow_logger.MLflowLogger"


def _problems(uri: str) -> list[str]:
    cfg = OmegaConf.create({"logger": {"mlflow": {"_target_": MLFLOW, "tracking_uri": uri}}})
    return logger_problems(cfg)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers (a server that hangs)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


class _Answers(BaseHTTPRequestHandler):
    """Answers every GET with the class's status, content type and body."""

    status, kind, body = 404, "text/html", b"<html>Not Found</html>"

    def do_GET(self) -> None:
        self.send_response(self.status)
        self.send_header("Content-Type", self.kind)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


def _serving(status: int, kind: str, body: bytes) -> list[str]:
    """logger_problems for a server on this machine answering `status`, `kind`, `body`."""
    handler = type("H", (_Answers,), {"status": status, "kind": kind, "body": body})
    server = HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        return _problems(f"http://127.0.0.1:{server.server_port}/")
    finally:
        server.shutdown()
        server.server_close()


def test_a_closed_port_is_one_line_naming_the_key_at_once() -> None:
    uri = f"http://127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    (line,) = _problems(uri)
    assert time.monotonic() - started < 3
    assert line.startswith(f"logger.mlflow.tracking_uri={uri}: the tracking server does not")
    assert "refused" in line and "logger.mlflow.tracking_uri=${paths.log_dir}/mlruns" in line


def test_a_server_that_never_answers_is_refused_after_the_probe(silent_port, monkeypatch) -> None:
    monkeypatch.setattr(probe, "PROBE_S", 0.5)
    started = time.monotonic()
    (line,) = _problems(f"http://127.0.0.1:{silent_port}/")
    assert time.monotonic() - started < 3 and "timed out" in line


MLFLOW_404 = b'{"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "Could not find"}'


@pytest.mark.parametrize(
    ("status", "kind", "body"),
    [
        (200, "application/json", b'{"experiment": {"experiment_id": "0"}}'),
        (404, "application/json", MLFLOW_404),  # a tracking server without a Default experiment
        (401, "text/html", b"login"),  # a server that wants a token: MLflow's client says so
    ],
)
def test_a_tracking_servers_answers_and_a_folder_store_pass(tmp_path, status, kind, body):
    assert _serving(status, kind, body) == []
    assert _problems(str(tmp_path / "mlruns")) == []


@pytest.mark.parametrize(
    ("status", "kind", "body"),
    [
        (404, "text/html", b"<html>Not Found</html>"),
        (501, "text/html", b"no"),
        (200, "text/html", b"hi"),
    ],
)
def test_a_server_that_is_no_tracking_server_is_one_line_naming_the_key(status, kind, body):
    started = time.monotonic()
    (line,) = _serving(status, kind, body)
    assert time.monotonic() - started < 3 and line.startswith("logger.mlflow.tracking_uri=http")
    assert f"not as an MLflow tracking server (HTTP {status} text/html for /api/2.0/" in line
    assert "\n" not in line
