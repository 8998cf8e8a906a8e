"""Reused CPU output buffers for per-batch work whose fresh allocations cost more than the work.

A float batch of 64 x 3 x 224 x 224 is 38.5 MB: above glibc's mmap threshold, so every fresh
one is new pages from the kernel. `make bench` measures the normaliser both ways
(bench/normalize.py): 2.8 ms per such batch into pooled buffers against 12.2 ms into a fresh
tensor, one thread (BENCHMARKS.md, 2026-12-01; at 256 x 3 x 32 x 32, 3 MB, the heap serves a
fresh one cheaply and the pool's bookkeeping costs 0.03 ms a batch: 0.126 against 0.098).
Buffers are handed out as aliases and taken back only once no tensor (a caller's variable,
an autograd graph, a view) shares their storage any more, so a result still in use is never
overwritten. Only torch's private storage use count tells that (torch has no public one);
that measurement is why it is used.
"""

from __future__ import annotations

import torch

_OWN_REFERENCES = 2  # the pool's tensor + the temporary storage object of the count itself


def _in_use(buffer: torch.Tensor) -> bool:
    """Whether any tensor besides `buffer` itself shares its storage."""
    storage = buffer.untyped_storage()
    return torch._C._storage_Use_Count(storage._cdata) > _OWN_REFERENCES


class BufferPool:
    """Up to `slots` CPU buffers; `take` returns an alias of a free one of the right shape,
    dtype and layout, or of a new one (the oldest unused buffer is dropped when full)."""

    def __init__(self, slots: int = 4) -> None:
        if slots < 1:
            raise ValueError(f"BufferPool needs at least one slot, got {slots}")
        self.slots = slots
        self._buffers: list[torch.Tensor] = []

    def take(
        self,
        shape: torch.Size | tuple[int, ...],
        dtype: torch.dtype,
        memory_format: torch.memory_format = torch.contiguous_format,
    ) -> torch.Tensor:
        """An uninitialised tensor to write a result into (the caller owns it until released)."""
        for buffer in self._buffers:
            if (
                buffer.shape == shape
                and buffer.dtype == dtype
                and buffer.is_contiguous(memory_format=memory_format)
                and not _in_use(buffer)
            ):
                return buffer.detach()
        if len(self._buffers) >= self.slots:
            # the oldest unused buffer makes room; by identity: `list.remove` compares tensors
            # with ==, elementwise, and fails when their shapes differ (uneven batches)
            oldest_free = next((i for i, b in enumerate(self._buffers) if not _in_use(b)), None)
            if oldest_free is not None:
                del self._buffers[oldest_free]
        buffer = torch.empty(shape, dtype=dtype, memory_format=memory_format)
        if len(self._buffers) < self.slots:
            self._buffers.append(buffer)
        return buffer.detach()
