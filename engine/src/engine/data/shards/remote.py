"""Remote shards read front to back, through network errors.

A failed open or read (connection refused or reset, a timeout, a server error, a command that
exits non-zero, fewer than MIN_BYTES in `dataset.read_timeout` seconds) is retried
`dataset.retries` times, waiting `dataset.backoff` seconds before the first retry and twice as
long before each next one; the count starts again once MIN_BYTES more have come. A reconnect
continues at the byte reached (engine/data/shards/openers.py: an HTTP Range request, checked
to start there, else the source read again up to that byte). After the last retry the error
names the URL and the byte offset. HTTP answers that retrying cannot change (404, 403, ...)
fail at once. A file read at any offset (Parquet: its footer, then the column chunks a row
group needs) is read the same way, a Range request at each seek (RangeReader).
"""

from __future__ import annotations

import contextlib
import http.client
import io
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO, TypeVar

from engine.core.text import shown
from engine.data.shards import ShardError
from engine.data.shards.openers import http_size, opener

T = TypeVar("T")
RETRYABLE = (OSError, http.client.HTTPException)
MIN_BYTES = 2**16  # a remote source must send this much per dataset.read_timeout seconds
MANIFEST_BYTES = 2**26  # the largest manifest read (64 MiB: labels of ~20M samples, ~1 GB parsed)
MANIFEST_READS = 10  # a remote manifest must arrive within this many dataset.read_timeout


@dataclass(frozen=True)
class Network:
    """How remote shards are read: retries, backoff (s) and read timeout (s)."""

    retries: int = 3
    backoff: float = 1.0
    timeout: float = 60.0

    def __post_init__(self) -> None:
        retries_ok = isinstance(self.retries, int) and self.retries >= 0
        for key, value, ok, expected in (
            ("retries", self.retries, retries_ok, "an int >= 0"),
            ("backoff", self.backoff, self.backoff >= 0, "seconds >= 0"),
            ("read_timeout", self.timeout, self.timeout > 0, "seconds > 0"),
        ):
            if not ok:
                raise ValueError(f"dataset.{key}={value!r}: expected {expected}.")


class RetryingReader(io.RawIOBase):
    """The bytes of a remote shard, read front to back through network errors (see above).
    A source slower than MIN_BYTES per `dataset.read_timeout` seconds (a server that drips)
    counts as failed, and one longer than `limit` bytes (its manifest's size: an endless
    body) is a ShardError, so a read always ends."""

    def __init__(
        self,
        name: str,
        open_at: Callable[[int], BinaryIO],
        network: Network,
        limit: int | None = None,
    ) -> None:
        self.name, self.open_at, self.network, self.limit = name, open_at, network, limit
        self.offset = 0  # bytes delivered so far
        self._stream: BinaryIO | None = None
        self._since, self._got = 0.0, 0  # the rate window: its start, bytes read in it
        self._failures, self._clean = 0, 0  # failures in a row, bytes read since the last

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while True:
            try:
                if self._stream is None:
                    self._stream = self.open_at(self.offset)
                    self._since, self._got = time.monotonic(), 0
                data = self._stream.read(len(buffer))
                self._check_rate(len(data))
                break
            except RETRYABLE as err:
                self._drop()
                self._failures += 1
                self._clean = 0
                failures = self._failures
                if failures > self.network.retries:
                    where = f"at byte {self.offset:,}"
                    raise ShardError(_gave_up(self.name, where, self.network, err)) from err
                time.sleep(self.network.backoff * 2 ** (failures - 1))
        buffer[: len(data)] = data
        self.offset += len(data)
        self._clean += len(data)
        if self._clean >= MIN_BYTES:  # real progress since the last failure: a fresh count
            self._failures = 0
        if self.limit is not None and self.offset > self.limit:
            raise ShardError(
                f"{shown(self.name)}: more than the {self.limit:,} bytes its manifest lists (or "
                "the server's Content-Length, when counted); the shard changed after that, or the "
                "server sends something else: write the manifest again, or check the server."
            )
        return len(data)

    def _check_rate(self, count: int) -> None:
        """Fewer than MIN_BYTES in a read_timeout window is a TimeoutError (retried)."""
        self._got += count
        now = time.monotonic()
        if now - self._since >= self.network.timeout:
            if self._got < MIN_BYTES:
                raise TimeoutError(
                    f"{self._got:,} bytes in {now - self._since:.0f} s, fewer than {MIN_BYTES:,} "
                    "in dataset.read_timeout"
                )
            self._since, self._got = now, 0

    def _drop(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            with contextlib.suppress(RETRYABLE):
                stream.close()

    def close(self) -> None:
        self._drop()
        super().close()


class RangeReader(RetryingReader):
    """A remote http(s) file of `size` bytes read at any offset: a seek away from the byte
    reached opens it again there. A read returns every byte asked for (fewer only at the end,
    as pyarrow expects of a file), its read timeout counted from the call: the time between
    reads is the reader's, not the server's."""

    def __init__(
        self, name: str, open_at: Callable[[int], BinaryIO], network: Network, size: int
    ) -> None:
        super().__init__(name, open_at, network)
        self.size = size

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.offset

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        target = offset + (0, self.offset, self.size)[whence]
        if target < 0:
            raise OSError(f"{shown(self.name)}: a seek to byte {target:,}, before its start")
        if target != self.offset:
            self._drop()
            self.offset = target
        return target

    def read(self, size: int | None = -1) -> bytes:
        left = max(0, self.size - self.offset)
        out = bytearray(left if size is None or size < 0 else min(size, left))
        view, done = memoryview(out), 0
        self._since, self._got = time.monotonic(), 0
        while done < len(out):
            count = self.readinto(view[done:])
            if not count:
                raise ShardError(
                    f"{shown(self.name)}: ends at byte {self.offset:,}, short of the "
                    f"{self.size:,} bytes the server gave as its size: the file changed while "
                    "being read, or the server sends something else; check the server."
                )
            done += count
        return bytes(out)


def open_ranged(name: str, network: Network, keys: str) -> RangeReader:
    """The http(s) file `name` (named by the config `keys`) for reading at any offset: its
    size asked of the server (retried as a read is), then read by Range requests."""
    size = retried(name, "HEAD", network, lambda: http_size(name, network.timeout, keys))
    return RangeReader(name, opener(name, "http", network.timeout, keys), network, size)


def _gave_up(name: str, where: str, network: Network, err: BaseException) -> str:
    fix = (
        "check the server, or raise dataset.read_timeout (seconds)"
        if isinstance(err, TimeoutError)
        else "check that the server is up and the URL right, or raise dataset.retries / "
        "dataset.backoff"
    )
    return (
        f"{shown(name)}: network error {where} after {network.retries} retries "
        f"({type(err).__name__}: {err}); {fix}."
    )


def retried(name: str, what: str, network: Network, call: Callable[[], T]) -> T:
    """`call()` (the request `what` about the remote file `name`, e.g. "HEAD"), retried on
    network errors as a read is; after the last retry a ShardError naming `name`."""
    failures = 0
    while True:
        try:
            return call()
        except RETRYABLE as err:
            failures += 1
            if failures > network.retries:
                raise ShardError(_gave_up(name, f"on {what}", network, err)) from err
            time.sleep(network.backoff * 2 ** (failures - 1))


def read_remote(name: str, kind: str, network: Network) -> bytes:
    """All bytes of a small remote file (a manifest), with the same retries; one longer than
    MANIFEST_BYTES (an endless body) is a ShardError naming it."""
    chunks, size = [], 0
    deadline = time.monotonic() + MANIFEST_READS * network.timeout
    with RetryingReader(name, opener(name, kind, network.timeout), network) as reader:
        while chunk := reader.read(2**20):
            chunks.append(chunk)
            size += len(chunk)
            if size > MANIFEST_BYTES:
                raise ShardError(
                    f"{shown(name)}: more than {MANIFEST_BYTES:,} bytes, not a manifest"
                )
            if time.monotonic() > deadline:
                raise ShardError(
                    f"{shown(name)}: still reading after {MANIFEST_READS} x dataset.read_timeout "
                    f"({MANIFEST_READS * network.timeout:.0f} s, {size:,} bytes so far); check "
                    "the server, or copy the manifest beside you and set dataset.manifest to it."
                )
    return b"".join(chunks)
