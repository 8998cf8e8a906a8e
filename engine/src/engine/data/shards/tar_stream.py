"""A tar stream read strictly, front to back (plain or gzip-compressed, told by its bytes).

Python's tarfile ends an archive quietly at a damaged header, or where the data stops on a
block boundary, which would drop every sample after it without a word; here both, data after
the end-of-archive block, truncation and corrupt compression are one `ShardError` naming the
shard and the last member read.
"""

from __future__ import annotations

import tarfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import BinaryIO

from engine.core.text import shown
from engine.data.shards import ShardError

TRAILER_BYTES = 2**20  # zeros allowed after the end-of-archive blocks (writers pad to 10 KiB)
HEADER_BYTES = 2**20  # the largest GNU long name or pax header read (tarfile reads it whole)
DRAIN = 2**20  # bytes read at a time through a member that is passed over


class _StrictHeader(tarfile.TarInfo):
    """A header that does not parse, or no header where the data stops, past the first member:
    an error (tarfile would take either for the end of the archive). A long-name or pax
    header larger than HEADER_BYTES is one too: tarfile would read it into memory whole."""

    def _proc_gnulong(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        _refuse_large(self, tarfile_)
        return super()._proc_gnulong(tarfile_)  # type: ignore[misc]

    def _proc_pax(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        _refuse_large(self, tarfile_)
        return super()._proc_pax(tarfile_)  # type: ignore[misc]

    @classmethod
    def fromtarfile(cls, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        try:
            return super().fromtarfile(tarfile_)
        except (tarfile.InvalidHeaderError, tarfile.TruncatedHeaderError) as err:
            if tarfile_.offset == 0:
                raise
            damaged = f"a damaged tar header at byte {tarfile_.offset}"
            raise tarfile.SubsequentHeaderError(damaged) from err
        except tarfile.EmptyHeaderError:
            if tarfile_.offset == 0:
                raise
            raise tarfile.SubsequentHeaderError(
                f"the data ends at byte {tarfile_.offset} without the end-of-archive blocks"
            ) from None


def _refuse_large(header: tarfile.TarInfo, tarfile_: tarfile.TarFile) -> None:
    if header.size > HEADER_BYTES:
        raise tarfile.InvalidHeaderError(
            f"a {header.size:,}-byte extended header at byte {tarfile_.offset} (at most "
            f"{HEADER_BYTES:,})"
        )


@contextmanager
def _reading(shard: str, last: list[str]) -> Iterator[None]:
    """Turn a broken tar stream into one `ShardError` naming the shard and the last member."""
    try:
        yield
    except (tarfile.TarError, EOFError, zlib.error, OSError) as err:
        after = f" after member {shown(last[0])}" if last else " before its first member"
        raise ShardError(
            f"{shown(shard)}: not a readable tar shard{after} ({type(err).__name__}: "
            f"{str(err) or 'no detail'}); the file is truncated or corrupt: copy or write it again."
        ) from err


def tar_files(
    stream: BinaryIO, shard: str, read: Callable[[tarfile.TarInfo], bool]
) -> Iterator[tuple[str, bytes | None]]:
    """(name, data) of each regular file in the tar `stream` of `shard`, in stored order; the
    data is read when `read(member)` says so (else None, and the stream skips it)."""
    last: list[str] = []
    with (
        _reading(shard, last),
        tarfile.open(fileobj=stream, mode="r|*", tarinfo=_StrictHeader) as tar,
    ):
        for member in tar:
            tar.members = []  # a stream keeps every header it read otherwise
            last[:] = [member.name]
            if not (member.isreg() or member.type not in tarfile.SUPPORTED_TYPES):
                continue  # links, folders: no data
            data = tar.extractfile(member)
            if read(member):
                yield member.name, data.read()  # type: ignore[union-attr]
            else:  # read through, not seeked: a size that lies ends at the data's end
                while data.read(DRAIN):  # type: ignore[union-attr]
                    pass
                if member.isreg():
                    yield member.name, None
        _check_end(tar, shard, last)


def _check_end(tar: tarfile.TarFile, shard: str, last: list[str]) -> None:
    """Only zeros may follow the end-of-archive block, and at most TRAILER_BYTES of them:
    anything else is a damaged header that tarfile took for the end (an all-zero block), or
    an endless stream."""
    after = f"member {shown(last[0])}" if last else "the start"
    read = 0
    while chunk := tar.fileobj.read(2**16):  # type: ignore[union-attr]
        read += len(chunk)
        if chunk.strip(b"\0"):
            raise ShardError(
                f"{shown(shard)}: a damaged tar header at byte {tar.offset} (after {after}); the "
                "samples after it cannot be read: copy or write the shard again."
            )
        if read > TRAILER_BYTES:
            raise ShardError(
                f"{shown(shard)}: more than {TRAILER_BYTES:,} bytes of zeros after the end of "
                f"the archive (after {after}); not a tar shard as written: copy or write it again."
            )
