"""A logger's server is asked once before any work: an unreachable MLflow tracking URI stops
the run in one line within seconds, not after minutes of silent retries."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from omegaconf import OmegaConf

from engine.runs.loggers import reachable
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


class _NotFound(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_error(404)

    def log_message(self, *args: object) -> None:
        pass


def test_a_closed_port_is_one_line_naming_the_key_at_once() -> None:
    uri = f"http://127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    (line,) = _problems(uri)
    assert time.monotonic() - started < 3
    assert line.startswith(f"logger.mlflow.tracking_uri={uri}: the tracking server does not")
    assert "refused" in line and "logger.mlflow.tracking_uri=${paths.log_dir}/mlruns" in line


def test_a_server_that_never_answers_is_refused_after_the_probe(silent_port, monkeypatch) -> None:
    monkeypatch.setattr(reachable, "PROBE_S", 0.5)
    started = time.monotonic()
    (line,) = _problems(f"http://127.0.0.1:{silent_port}/")
    assert time.monotonic() - started < 3 and "timed out" in line


def test_any_http_answer_and_a_folder_store_pass(tmp_path) -> None:
    server = HTTPServer(("127.0.0.1", 0), _NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert _problems(f"http://127.0.0.1:{server.server_port}") == []  # a 404 is an answer
    finally:
        server.shutdown()
        server.server_close()
    assert _problems(str(tmp_path / "mlruns")) == []
