"""Collate functions for `loader.collate_fn` (and the `collate` config group)."""

from __future__ import annotations

from typing import TypeVar

import torch
from torch.nn.utils.rnn import pad_sequence

T = TypeVar("T")


def already_batched(batch: T) -> T:
    """For datasets whose `__getitems__` returns a whole batch: nothing left to stack."""
    return batch


def pad_collate(
    batch: list[tuple[torch.Tensor, int]], padding_value: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Pad variable-length sequences to the batch's own longest one.

    Returns (padded (B, T_max), labels (B,), lengths (B,), mask (B, T_max), True on tokens).
    """
    sequences = [item[0] for item in batch]
    lengths = torch.tensor([len(s) for s in sequences], dtype=torch.long)
    padded = pad_sequence(sequences, batch_first=True, padding_value=padding_value)
    mask = torch.arange(padded.shape[1])[None, :] < lengths[:, None]
    labels = torch.tensor([int(item[1]) for item in batch], dtype=torch.long)
    return padded, labels, lengths, mask
