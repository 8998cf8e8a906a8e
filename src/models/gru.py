"""A GRU classifier for padded token sequences that uses their true lengths."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from engine.api import Positive, Share


class GRUClassifier(nn.Module):
    """Embedding -> GRU over packed sequences (padding never enters the recurrence) ->
    [last hidden state, masked mean of the outputs] -> linear."""

    def __init__(
        self,
        num_classes: int,
        vocab_size: int,
        embed_dim: Positive,
        hidden_size: Positive,
        num_layers: Positive,
        dropout: Share,
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.gru = nn.GRU(
            embed_dim,
            hidden_size,
            num_layers,
            batch_first=True,
            dropout=dropout if num_layers > 1 else 0.0,
        )
        self.head = nn.Sequential(nn.Dropout(dropout), nn.Linear(2 * hidden_size, num_classes))

    def forward(
        self, tokens: torch.Tensor, lengths: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        packed = pack_padded_sequence(
            self.embed(tokens), lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        outputs, last = self.gru(packed)
        outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=tokens.shape[1])
        weights = mask.unsqueeze(-1).to(outputs.dtype)
        mean = (outputs * weights).sum(1) / weights.sum(1).clamp(min=1)
        return self.head(torch.cat([last[-1], mean], dim=1))
