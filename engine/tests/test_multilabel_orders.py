"""The orders on multi-label targets (N, C): sampler=weighted weighs each sample 1 / count(its
rarest label), an unlabelled one 1 / (number of unlabelled samples); a limited validation
spreads over the labels (the template trains its multilabel_csv experiment with them)."""

from __future__ import annotations

import math

import numpy as np
import torch

from engine.api import MapDataset
from engine.data.balance import balance_weights
from engine.data.samplers import SpreadSample, WeightedOrder


class MultiHot(MapDataset):
    """(index, multi-hot label) pairs with the given (N, C) targets, no files."""

    multi_label = True

    def __init__(self, targets: np.ndarray) -> None:
        self.targets = targets.astype(np.uint8)
        self.classes = [str(c) for c in range(targets.shape[1])]

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.tensor([i], dtype=torch.float32), torch.from_numpy(self.targets[i]).float()


def test_each_sample_weighs_one_over_the_count_of_its_rarest_label() -> None:
    targets = np.array(
        [[1, 0, 0], [1, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 1], [0, 0, 0], [0, 0, 0]]
    )  # counts: label 0 in 4 samples, label 1 in 2, label 2 in 1; 2 samples without a label
    expected = [1 / 4, 1 / 4, 1 / 4, 1 / 2, 1 / 1, 1 / 2, 1 / 2]
    assert balance_weights(targets).tolist() == expected


def test_a_rare_labels_samples_are_drawn_as_often_as_a_common_ones() -> None:
    targets = np.array([[1, 0]] * 40 + [[0, 1]] * 4 + [[0, 0]] * 2)  # common, rare, unlabelled
    draws = 30_000
    sampler = WeightedOrder(MultiHot(targets), seed=0, num_samples=draws)
    sampler.set_epoch(1)
    group = np.select([targets[:, 0] == 1, targets[:, 1] == 1], [0, 1], 2)
    counts = np.bincount(group[[int(i) for i in sampler]], minlength=3)
    tolerance = 5 * math.sqrt(draws * (1 / 3) * (2 / 3))  # 5 binomial standard deviations
    assert np.all(np.abs(counts - draws / 3) <= tolerance), counts  # unweighted: 87/9/4 %


def test_a_limited_validation_takes_every_label_in_turn() -> None:
    targets = np.array([[1, 0]] * 10 + [[0, 1]] * 2 + [[0, 0]])  # sorted by label, as listed
    assert list(SpreadSample(MultiHot(targets), 3)) == [0, 10, 12]
