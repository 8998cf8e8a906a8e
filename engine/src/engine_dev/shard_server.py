"""Test helpers for remote files: a loopback HTTP server (engine/data/shards/serve.py) that can
break connections, drip and ignore Range requests, and shards written by webdataset itself."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from engine.data.datasets.tar_shards import TarShardDataset
from engine.data.shards.serve import RangeHandler


@dataclass
class Faults:
    """What the server does wrong: cut each of the first `drops` answers per file after `cut`
    bytes (a connection that breaks mid-shard), answer Range requests (or not), and with
    `down`, answer each shard's requests after its first with 503 (a server gone down); send
    `etag` as each shard's ETag; without `head`, refuse HEAD requests (405); with `drip`, send
    bodies at 16 bytes per `drip` seconds. A shard is a file whose name ends in `suffixes`."""

    cut: int | None = None
    drops: float = 1
    ranges: bool = True
    down: bool = False
    etag: str | None = None
    head: bool = True
    drip: float | None = None
    suffixes: tuple[str, ...] = (".tar", ".gz")
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # GETs: (path, Range)
    heads: list[str] = field(default_factory=list)  # the paths of HEAD requests

    def served(self, suffix: str) -> list[tuple[str, str | None]]:
        return [r for r in self.requests if r[0].endswith(suffix)]


class FaultyHandler(RangeHandler):
    faults: Faults

    def send_head(self) -> Any:
        if self.command == "HEAD":
            self.faults.heads.append(self.path)
            if not self.faults.head:
                self.send_error(405, "Method Not Allowed")
                return None
            return super().send_head()
        self.faults.requests.append((self.path, self.headers.get("Range")))
        shard = self.path.endswith(self.faults.suffixes)
        if shard and self.faults.down and len(self.faults.served(self.path)) > 1:
            self.send_error(503, "Service Unavailable")
            return None
        if self.faults.ranges:
            return super().send_head()
        return SimpleHTTPRequestHandler.send_head(self)

    def end_headers(self) -> None:
        if self.faults.etag is not None and self.path.endswith(self.faults.suffixes):
            self.send_header("ETag", self.faults.etag)
        super().end_headers()

    def copyfile(self, source: Any, outputfile: Any) -> None:
        cut, done = self.faults.cut, len(self.faults.served(self.path))
        shard = self.path.endswith(self.faults.suffixes)
        if shard and self.faults.drip is not None:
            return self._drip(source, outputfile, self.faults.drip)
        if cut is None or not shard or done > self.faults.drops:
            return super().copyfile(source, outputfile)
        outputfile.write(source.read(cut))
        self.close_connection = True  # the client was promised more: it sees a broken read

    def _drip(self, source: Any, outputfile: Any, pause: float) -> None:
        """16 bytes every `pause` seconds, until the body is sent or the client hangs up."""
        while chunk := source.read(16):
            try:
                outputfile.write(chunk)
                outputfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                return  # the client gave up waiting: what a drip is for
            time.sleep(pause)


@contextmanager
def serving(folder: Path, faults: Faults | None = None) -> Iterator[str]:
    """`folder` served on a free loopback port while the block runs; yields its base URL."""
    handler = type("Handler", (FaultyHandler,), {"faults": faults or Faults()})
    with loopback(partial(handler, directory=str(folder))) as url:
        yield url


@contextmanager
def loopback(handler: Any) -> Iterator[str]:
    """An HTTP server of `handler` (a request handler class or factory) on a free loopback
    port while the block runs; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def write_wds_shards(
    images: Path, out: Path, split: str, key: str = "{i:06d}", **writer: Any
) -> list[str]:
    """The images of `images`/<class>/ as shards of 16 written by webdataset's ShardWriter
    (`writer`: e.g. compress=True), in a seeded order, each key made from `key`; the names."""
    import webdataset as wds

    classes = sorted(p.name for p in images.iterdir())
    files = sorted(images.glob("*/*"))
    random.Random(0).shuffle(files)
    out.mkdir(parents=True, exist_ok=True)
    suffix = ".tar.gz" if writer.get("compress") else ".tar"
    with wds.ShardWriter(f"{out}/{split}-%06d{suffix}", maxcount=16, verbose=0, **writer) as sink:
        for i, path in enumerate(files):
            sample = {path.suffix[1:]: path.read_bytes(), "cls": classes.index(path.parent.name)}
            sink.write({"__key__": key.format(i=i, split=split)} | sample)
    return sorted(p.name for p in out.glob(f"{split}-*{suffix}"))


DEMO_TRAIN, DEMO_VAL = "train-{000000..000002}.tar.gz", "val-{000000..000001}.tar.gz"
FAST = {"retries": 2, "backoff": 0.01, "read_timeout": 10.0}  # a network fault fails a test soon


def demo_stream(where: str, split: str = "train", **kwargs: Any) -> TarShardDataset:
    """`split` of the demo shards (`write_demo_shards`) at `where`, a folder or a URL, read as a
    stream with FAST's network settings unless `kwargs` say otherwise."""
    return TarShardDataset(split, f"{where}/{DEMO_TRAIN}", f"{where}/{DEMO_VAL}", **(FAST | kwargs))


def write_demo_shards(demo_dir: Path, out: Path) -> Path:
    """The demo images as gzip-compressed shards of 16 by webdataset's ShardWriter in `out`,
    keys with a folder (`dir/sub_000123`), named by a brace pattern (DEMO_TRAIN, DEMO_VAL);
    train 48 + val 30 samples; with their manifest written beside them (what a server then
    serves)."""
    from engine.data.shards.manifest import main as write_manifest

    for split in ("train", "val"):
        images = demo_dir / "imagefolder" / split
        names = write_wds_shards(images, out, split, "dir/sub_{i:06d}", compress=True)
        assert names == [f"{split}-{i:06d}.tar.gz" for i in range(len(names))]
    write_manifest([f"{out}/{DEMO_TRAIN}", f"{out}/{DEMO_VAL}", "--out", str(out / "shards.json")])
    return out
