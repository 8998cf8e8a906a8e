"""Serve a folder of shards over HTTP from this machine, Range requests included (a read that
broke off continues where it stopped): for trying `dataset=iterable` with URLs, the tests and
`make bench`. Not a production server: use an object store or any static file server there.

    python -m engine.data.shards.serve data/shards --port 8000   # http://127.0.0.1:8000/...
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_RANGE = re.compile(r"bytes=(\d+)-")


class RangeHandler(SimpleHTTPRequestHandler):
    """The standard library's file handler, plus `Range: bytes=N-` (206 Partial Content)."""

    def send_head(self) -> Any:
        start = _RANGE.fullmatch(self.headers.get("Range", ""))
        path = self.translate_path(self.path)
        if start is None or not os.path.isfile(path):
            return super().send_head()
        f = open(path, "rb")  # noqa: SIM115 (do_GET copies it to the client, then closes it)
        size, offset = os.fstat(f.fileno()).st_size, int(start.group(1))
        if offset >= size:
            f.close()
            self.send_error(416, "Range Not Satisfiable")
            return None
        f.seek(offset)
        self.send_response(206)
        self.send_header("Content-Type", self.guess_type(path))
        self.send_header("Content-Range", f"bytes {offset}-{size - 1}/{size}")
        self.send_header("Content-Length", str(size - offset))
        self.end_headers()
        return f

    def copyfile(self, source: Any, outputfile: Any) -> None:
        shutil.copyfileobj(source, outputfile, 2**20)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: one line per request would drown the training log."""


def make_server(folder: str, port: int = 0, bind: str = "127.0.0.1") -> ThreadingHTTPServer:
    """A server for `folder` on `bind`:`port` (0: a free port, see `server.server_port`)."""
    handler = partial(RangeHandler, directory=folder)
    return ThreadingHTTPServer((bind, port), handler)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="the folder to serve (e.g. data/shards)")
    parser.add_argument("--port", type=int, default=8000, help="port; 0 = any free one")
    parser.add_argument("--bind", default="127.0.0.1", help="address to listen on")
    args = parser.parse_args(argv)
    with make_server(args.folder, args.port, args.bind) as server:
        host, port = server.server_address[:2]
        print(f"serving {args.folder} at http://{host}:{port}/ (Ctrl-C stops)", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            server.serve_forever()


if __name__ == "__main__":
    main()
