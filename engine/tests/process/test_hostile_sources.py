"""Hostile shard sources end bounded in time and memory with one line naming the URL or shard:
servers that never stop sending, drip, answer a Range request with other bytes (with a manifest
and without one: then the shards are counted at start-up, through the same guards); shards whose
headers declare sizes they do not hold, whose labels overflow, that are FIFOs, or that end in
megabytes of zeros. Each is read in a child process under an address-space limit with a hard
timeout (engine_dev/fuzz_child.py), so a hang fails here instead of stalling the suite."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import tarfile
import time
from contextlib import AbstractContextManager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from PIL import Image

from engine.data.shards import ShardError, remote
from engine.data.shards.manifest import load
from engine.data.shards.remote import Network, read_remote
from engine_dev.shard_server import loopback

ROOT = Path(__file__).resolve().parents[2]
NETWORK = {"retries": 1, "backoff": 0.0, "read_timeout": 1.0}
PADDING = 40_000  # bytes of an ignored member, so a shard is long enough to break midway


def _member(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _shard() -> bytes:
    """One sample (a.jpg, a.cls) after an ignored a.txt member of PADDING bytes."""
    image = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(image, "JPEG")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        _member(tar, "a.txt", os.urandom(PADDING))
        _member(tar, "a.jpg", image.getvalue())
        _member(tar, "a.cls", b"0")
    return buffer.getvalue()


def _header(name: str, size: int, kind: bytes = tarfile.REGTYPE) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.type = size, kind
    return info.tobuf(format=tarfile.GNU_FORMAT)[:512]


class Hostile(BaseHTTPRequestHandler):
    """/<mode>/x.tar and /<mode>/shards.json, answered as `mode` says; under /bare/ the same
    with no manifest (404), a HEAD answering the shard's size (none for mode no_length)."""

    shard = b""

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def do_HEAD(self) -> None:
        self.send_response(200)
        if not self.path.startswith("/bare/no_length/"):
            self.send_header("Content-Length", str(len(self.shard)))
        self.end_headers()

    def do_GET(self) -> None:
        bare = self.path.startswith("/bare/")
        mode, _, name = self.path.removeprefix("/bare").strip("/").partition("/")
        if name == "shards.json" and bare:
            self._send(404, b"")
        elif name == "shards.json":
            entry = {"samples": 1, "labels": [0], "label_from": "cls", "errors": []}
            body = json.dumps({"format": "tar-shards", "version": 1, "shards": {
                "x.tar": entry | {"size": len(self.shard)}}}).encode()  # fmt: skip
            self._send(200, body)
        elif mode == "endless":  # the shard, then zeros for ever (no Content-Length)
            self._stream(self.shard, forever=True)
        elif mode == "endless_member":  # a member declaring 10^15 bytes, then zeros for ever
            self._stream(_header("a.txt", 10**15), forever=True)
        elif mode == "slow_forever":  # 70 KiB every 0.1 s, never ending: above the rate floor
            self.send_response(200)
            self.end_headers()
            try:
                while True:
                    self.wfile.write(bytes(70 * 1024))
                    time.sleep(0.1)
            except OSError:  # the client gave up: what it should do
                pass
        elif mode == "drip":  # one byte every half second
            self.send_response(200)
            self.send_header("Content-Length", str(len(self.shard)))
            self.end_headers()
            try:
                for byte in self.shard:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.5)
            except OSError:  # the client gave up: what it should do
                pass
        elif mode == "wrong_range":  # the connection breaks; a Range answer starts at byte 0
            if self.headers.get("Range"):
                self.send_response(206)
                size = len(self.shard)
                self.send_header("Content-Range", f"bytes 0-{size - 1}/{size}")
                self.send_header("Content-Length", str(size))
                self.end_headers()
                self.wfile.write(self.shard)
            else:
                self.send_response(200)
                self.send_header("Content-Length", str(len(self.shard)))
                self.end_headers()
                self.wfile.write(self.shard[: PADDING // 2])
                self.close_connection = True

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _stream(self, head: bytes, forever: bool) -> None:
        self.send_response(200)
        self.end_headers()
        try:
            self.wfile.write(head)
            while forever:
                self.wfile.write(bytes(2**16))
        except OSError:  # the client gave up: what it should do
            pass


def _server() -> AbstractContextManager[str]:
    """The hostile server on a free loopback port; its base URL."""
    return loopback(type("Handler", (Hostile,), {"shard": _shard()}))


def _local_shards(folder: Path) -> dict[str, bytes]:
    shard = _shard()
    end = len(shard)
    long_name = _header("././@LongLink", 3 * 2**30, tarfile.GNUTYPE_LONGNAME)
    return {
        "trailer_zeros": shard + bytes(3 * 2**20),
        "skipped_member_lies": _header("a.txt", 10**13) + bytes(14_000),
        "long_name_header.tar.gz": gzip.compress(long_name + bytes(2**20)),
        "cls_5000_digits": _tar_with_label(b"9" * 5000),
        "cls_past_int64": _tar_with_label(b"99999999999999999999"),
        "valid": shard[:end],
    }


def _tar_with_label(label: bytes) -> bytes:
    image = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(image, "JPEG")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        _member(tar, "a.jpg", image.getvalue())
        _member(tar, "a.cls", label)
    return buffer.getvalue()


def _read_in_a_child(items: list[dict], folder: Path) -> dict[str, dict]:
    job = folder / "job.json"
    job.write_text(json.dumps({"headroom_bytes": 2**30, "items": items}))
    done = subprocess.run(
        [sys.executable, "-m", "engine_dev.fuzz_child", str(job)],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return {r["path"]: r for r in map(json.loads, done.stdout.splitlines())}


def test_hostile_servers_and_shards_end_in_one_line_naming_them(tmp_path: Path) -> None:
    items, expected = [], {}
    for name, data in _local_shards(tmp_path).items():
        path = tmp_path / (name if name.endswith(".gz") else f"{name}.tar")
        path.parent.mkdir(exist_ok=True)
        (tmp_path / name).mkdir()
        path = tmp_path / name / path.name
        path.write_bytes(data)
        items.append({"kind": "shard", "path": str(path), "options": {"ignore_exts": "txt"}})
    os.mkfifo(tmp_path / "fifo.tar")
    items.append({"kind": "shard", "path": str(tmp_path / "fifo.tar")})
    expected = {
        "trailer_zeros": "more than 1,048,576 bytes of zeros after the end of the archive",
        "skipped_member_lies": "not a readable tar shard after member a.txt",
        "long_name_header": "extended header at byte",
        "cls_5000_digits": "a .cls member must hold a class index",
        "cls_past_int64": "a .cls member must hold a class index",
        "fifo": "it is a FIFO (named pipe), not a shard (a tar file)",
    }
    with _server() as url:
        for mode in ("endless", "endless_member", "drip", "wrong_range"):
            items.append({"kind": "shard", "path": f"{url}/{mode}/x.tar", "options": NETWORK})
        for mode in ("endless", "endless_member", "drip", "wrong_range", "no_length"):
            counted = NETWORK | {"manifest_cache": str(tmp_path / "cache")}  # no manifest
            items.append({"kind": "shard", "path": f"{url}/bare/{mode}/x.tar", "options": counted})
        expected |= {
            "endless": "more than the",
            "endless_member": "more than the",
            "drip": "fewer than 65,536 in dataset.read_timeout",
            "wrong_range": "asked for bytes 20000- and the server answered 'bytes 0-",
            "no_length": "the server gives no Content-Length for it (HEAD)",
        }
        results = _read_in_a_child(items, tmp_path)
    assert results[str(tmp_path / "valid" / "valid.tar")]["ok"]
    assert len([path for path in results if "/bare/" in path]) == 5
    assert not (tmp_path / "cache").exists()  # no failed count is cached
    for path, result in results.items():
        name = next((n for n in expected if f"/{n}" in path.removeprefix(f"{url}/bare")), None)
        if name is None:
            continue
        assert not result["ok"] and result["type"] == "ShardError", (name, result)
        assert "\n" not in result["error"] and path.rpartition("/")[2] in result["error"]
        assert expected[name] in result["error"], (name, result["error"])


def test_an_endless_manifest_is_refused_naming_it(monkeypatch) -> None:
    monkeypatch.setattr(remote, "MANIFEST_BYTES", 2**20)
    with (
        _server() as url,
        pytest.raises(ShardError, match=rf"{url}/endless/x.tar: more than 1,048,576 bytes"),
    ):
        read_remote(
            f"{url}/endless/x.tar",
            "http",
            Network(**{"retries": 0, "backoff": 0.0, "timeout": 2.0}),
        )


def test_a_manifest_that_never_finishes_arriving_is_refused_naming_it() -> None:
    network = Network(retries=0, backoff=0.0, timeout=0.3)
    with _server() as url, pytest.raises(ShardError, match=r"still reading after 10 x dataset"):
        read_remote(f"{url}/slow_forever/manifest", "http", network)


def test_a_manifest_of_millions_of_empty_lists_is_refused_before_parsing(tmp_path) -> None:
    """480 MB of `[],` parsed to 5 GB; counting brackets first costs nothing."""
    head = b'{"format": "tar-shards", "version": 1, "shards": {}, "x": ['
    path = tmp_path / "shards.json"
    path.write_bytes(head + b"[]," * 4_100_000 + b"[]]}")
    with pytest.raises(ValueError, match=r"holds 4,100,00\d lists and objects, more than"):
        load(str(path), Network())
