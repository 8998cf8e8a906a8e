"""Remote shards read front to back, through network errors.

A failed open or read (connection refused or reset, a timeout, a server error, a command that
exits non-zero) is retried `dataset.retries` times, waiting `dataset.backoff` seconds before the
first retry and twice as long before each next one; the count starts again after every read
that succeeds. A reconnect continues at the byte reached (engine/data/shards/openers.py: an HTTP
Range request, else the source read again up to that byte). After the last retry the error
names the URL and the byte offset. HTTP answers that retrying cannot change (404, 403, ...)
fail at once.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from engine.core.text import shown
from engine.data.shards import ShardError
from engine.data.shards.openers import opener

RETRYABLE = (OSError, http.client.HTTPException)


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
    """The bytes of a remote shard, read front to back through network errors (see above)."""

    def __init__(self, name: str, open_at: Callable[[int], BinaryIO], network: Network) -> None:
        self.name, self.open_at, self.network = name, open_at, network
        self.offset = 0  # bytes delivered so far
        self._stream: BinaryIO | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        failures = 0
        while True:
            try:
                if self._stream is None:
                    self._stream = self.open_at(self.offset)
                data = self._stream.read(len(buffer))
                break
            except RETRYABLE as err:
                self._drop()
                failures += 1
                if failures > self.network.retries:
                    raise ShardError(
                        f"{shown(self.name)}: network error at byte {self.offset:,} after "
                        f"{self.network.retries} retries ({type(err).__name__}: {err}); check "
                        "that the server is up and the URL right, or raise dataset.retries / "
                        "dataset.backoff."
                    ) from err
                time.sleep(self.network.backoff * 2 ** (failures - 1))
        buffer[: len(data)] = data
        self.offset += len(data)
        return len(data)

    def _drop(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            with contextlib.suppress(RETRYABLE):
                stream.close()

    def close(self) -> None:
        self._drop()
        super().close()


def read_remote(name: str, kind: str, network: Network) -> bytes:
    """All bytes of a small remote file (a manifest), with the same retries."""
    with RetryingReader(name, opener(name, kind, network.timeout), network) as reader:
        return reader.read()
