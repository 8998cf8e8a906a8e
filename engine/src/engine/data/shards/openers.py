"""Opening a remote shard at a byte offset, by kind: `http(s)://` (a Range request; a server
that ignores it, answering 200 instead of 206, is read up to the offset), `pipe:CMD` (the
command run again, its output read up to the offset) and fsspec URLs (opened and seeked).
An HTTP answer that retrying cannot change (404, 403, ...) is a `ShardError` at once (`Missing`
for 404 and 410: there is no such file); other failures are OSErrors, which
engine/data/shards/remote.py retries. `http_version` asks a server (HEAD) what a shard's size
and version are, for counting shards that have no manifest (engine/data/shards/tally.py);
`http_size` what a file's size is, for reading it by byte ranges (Parquet). `keys` names the
config keys that give the URL, for the fix a refusal names.
"""

from __future__ import annotations

import http.client
import io
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable
from email.message import Message
from typing import BinaryIO

from engine.core.text import shown
from engine.data.shards import BUILD_HINT, ShardError

CHUNK = 2**20  # bytes read at a time while skipping to an offset
RETRY_STATUS = {408, 429}  # and every 5xx: the server may answer later
MISSING_STATUS = {404, 410}  # no such file
HEAD_REFUSED = {403, 405, 501}  # HEAD answers after which a one-byte GET is asked instead
VERSION_CHARS = 200  # the most of an ETag or Last-Modified kept (a server may send 64 KiB)
SHARD_KEYS = "dataset.train_shards / val_shards (or dataset.manifest)"  # where shard URLs come from


class Missing(ShardError):
    """A remote file the server says does not exist (HTTP 404 or 410, or fsspec's
    FileNotFoundError)."""


def _skip(stream: BinaryIO, count: int) -> None:
    """Read and drop the first `count` bytes of `stream` (a source that cannot seek)."""
    while count > 0:
        chunk = stream.read(min(count, CHUNK))
        if not chunk:
            raise OSError("the source is shorter than when it was first read")
        count -= len(chunk)


def _http(url: str, timeout: float, keys: str) -> Callable[[int], BinaryIO]:
    def open_at(offset: int) -> BinaryIO:
        headers = {"Range": f"bytes={offset}-"} if offset else {}
        try:
            response = urllib.request.urlopen(
                urllib.request.Request(url, headers=headers), timeout=timeout
            )
        except urllib.error.HTTPError as err:
            if err.code == 416:  # nothing left after `offset`
                err.close()
                return io.BytesIO()
            _refuse(err, url, keys)
            raise
        body = _Body(response)
        if offset and response.status != 206:  # no Range support: read up to `offset`
            _skip(body, offset)  # type: ignore[arg-type]
        elif offset:
            _check_range(response, offset)
        return body  # type: ignore[return-value]

    return open_at


def _refuse(err: urllib.error.HTTPError, url: str, keys: str) -> None:
    """An HTTP error that retrying cannot change as a `ShardError` (`Missing` for 404, 410)."""
    if err.code < 500 and err.code not in RETRY_STATUS:
        err.close()
        error = Missing if err.code in MISSING_STATUS else ShardError
        raise error(
            f"{shown(url)}: HTTP {err.code} {shown(str(err.reason))}; check the URL in {keys}."
        ) from None


def _headers(url: str, timeout: float, keys: str) -> tuple[Message, str]:
    """The headers the server sends for `url` and the size they give (HEAD; where HEAD is
    refused, as by S3 URLs signed for GET, a one-byte GET)."""
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, method="HEAD"), timeout=timeout
        ) as response:
            return response.headers, response.headers.get("Content-Length", "")
    except urllib.error.HTTPError as err:
        if err.code not in HEAD_REFUSED:
            _refuse(err, url, keys)
            raise
        err.close()
        return _first_byte(url, timeout, keys)


def http_size(url: str, timeout: float, keys: str) -> int:
    """The size of the file at `url` as the server gives it: a read by byte ranges (Parquet's
    footer is at the end) needs it first."""
    size = _headers(url, timeout, keys)[1]
    if not size.isdigit():
        raise ShardError(
            f"{shown(url)}: the server gives no Content-Length for it (HEAD), so it cannot be "
            f"read by byte ranges; copy the file beside you and name that in {keys}."
        )
    return int(size)


def http_version(url: str, timeout: float) -> dict[str, int | str]:
    """What the server says of the shard at `url` (see _headers): its `size` (required: it
    bounds the read that counts the shard) and, where sent, its `etag` and `last_modified`; a
    shard changed on the server changes one of them."""
    headers, size = _headers(url, timeout, SHARD_KEYS)
    if not size.isdigit():
        raise ShardError(
            f"{shown(url)}: the server gives no Content-Length for it (HEAD), so it cannot "
            f"be counted within a known size; write its manifest with {BUILD_HINT} and set "
            "dataset.manifest to it."
        )
    version: dict[str, int | str] = {"size": int(size)}
    for key, header in (("etag", "ETag"), ("last_modified", "Last-Modified")):
        if headers.get(header):
            version[key] = headers[header][:VERSION_CHARS]
    return version


def _first_byte(url: str, timeout: float, keys: str) -> tuple[Message, str]:
    """The headers of a GET of the first byte of `url` and the size they give (the total of
    a 206's Content-Range, or a 200's Content-Length); the body is not read."""
    request = urllib.request.Request(url, headers={"Range": "bytes=0-0"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            if response.status == 206:
                return response.headers, response.headers.get("Content-Range", "").rpartition("/")[
                    2
                ]
            return response.headers, response.headers.get("Content-Length", "")
    except urllib.error.HTTPError as err:
        _refuse(err, url, keys)
        raise


def _check_range(response: http.client.HTTPResponse, offset: int) -> None:
    """A 206 answer must start where it was asked to (`Content-Range: bytes OFFSET-...`): a
    server that sends another part would have its bytes read as the ones at `offset`."""
    answered = response.headers.get("Content-Range", "")
    start = answered.removeprefix("bytes ").partition("-")[0].strip()
    if start != str(offset):
        response.close()
        raise OSError(f"asked for bytes {offset}- and the server answered {answered!r}")


class _Body:
    """An HTTP response body whose early end is an error: http.client returns no more bytes
    when a connection closes before Content-Length bytes came, as if the body had ended."""

    def __init__(self, response: http.client.HTTPResponse) -> None:
        self.response = response

    def read(self, size: int) -> bytes:
        """Up to `size` bytes, as soon as some arrive (one receive: a slow server cannot hold
        a read for long; engine/data/shards/remote.py judges its rate)."""
        data = self.response.read1(size)
        if not data and size and self.response.length:  # bytes promised, none left to read
            raise http.client.IncompleteRead(b"", self.response.length)
        return data

    def close(self) -> None:
        self.response.close()


class _Command(io.RawIOBase):
    """The standard output of a shell command; a non-zero exit at its end is an OSError."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.process = subprocess.Popen(
            command, shell=True, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL
        )

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self.process.stdout.read1(size)  # type: ignore[union-attr]
        if not data and self.process.wait() != 0:
            raise OSError(f"the command exited with status {self.process.returncode}")
        return data

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.stdout.close()  # type: ignore[union-attr]
        self.process.wait()
        super().close()


def _command(command: str) -> Callable[[int], BinaryIO]:
    def open_at(offset: int) -> BinaryIO:
        stream = _Command(command)
        _skip(stream, offset)  # type: ignore[arg-type]
        return stream  # type: ignore[return-value]

    return open_at


def _fsspec(url: str) -> Callable[[int], BinaryIO]:
    def open_at(offset: int) -> BinaryIO:
        import fsspec

        try:
            stream = fsspec.open(url, "rb").open()
        except FileNotFoundError:
            raise Missing(
                f"{shown(url)}: no such file; check dataset.train_shards / val_shards (or "
                "dataset.manifest)."
            ) from None
        stream.seek(offset)
        return stream

    return open_at


def opener(
    name: str, kind: str, timeout: float, keys: str = SHARD_KEYS
) -> Callable[[int], BinaryIO]:
    """A function that opens the remote file `name` (of `kind`: http, pipe, fsspec) at a byte
    offset."""
    if kind == "http":
        return _http(name, timeout, keys)
    if kind == "pipe":
        return _command(name.removeprefix("pipe:"))
    return _fsspec(name)
