"""The pass's running totals (engine.training.totals.PassTotals) and the steps an epoch takes:
a resumed epoch continues its sums; an unsized stream asks for a length."""

from __future__ import annotations

import pytest
import torch
from hydra.utils import instantiate
from torch.utils.data import DataLoader, IterableDataset

from engine.training.metric import Metric
from engine.training.optimization import optimizer_steps_per_epoch
from engine.training.totals import PassTotals

LOGITS = torch.tensor([[2.0, 1.0, 0.0], [0.0, 2.0, 1.0], [1.0, 0.0, 2.0], [2.0, 0.0, 1.0]])
LABELS = torch.tensor([0, 2, 1, 2])


class Hits(Metric):
    """The share whose label is the argmax."""

    def sums(self, device: torch.device) -> dict[str, torch.Tensor]:
        return {"correct": torch.zeros((), dtype=torch.long, device=device)}

    def update(
        self, sums: dict[str, torch.Tensor], logits: torch.Tensor, labels: torch.Tensor
    ) -> None:
        sums["correct"] += (logits.argmax(1) == labels).sum()

    def value(self, sums: dict[str, torch.Tensor], samples: int) -> float:
        return sums["correct"].item() / samples


def test_totals_survive_a_round_trip_through_their_state() -> None:
    """A resumed epoch continues the sums of the checkpointed part."""
    totals = PassTotals(torch.device("cpu"), {"acc": Hits()})
    totals.add(torch.tensor(1.5), LOGITS[:2], LABELS[:2])
    copy = PassTotals(torch.device("cpu"), {"acc": Hits()})
    copy.load_state_dict(totals.state_dict())
    copy.add(torch.tensor(0.5), LOGITS[2:], LABELS[2:])
    assert copy.means("val", "") == {"val/loss": 1.0, "val/acc": 0.25}


def test_unsized_stream_asks_for_a_length(reference_cfg) -> None:
    class Stream(IterableDataset):
        def __iter__(self):
            yield from ((torch.zeros(3), 0) for _ in range(4))

    settings = instantiate(reference_cfg("stream").trainer)
    with pytest.raises(ValueError, match=r"has no __len__.*trainer\.limit_train_batches"):
        optimizer_steps_per_epoch(DataLoader(Stream(), batch_size=2), settings)
