"""Variable-length sequences: padding collate, the JSONL dataset, the GRU learning the demo."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from hydra.errors import InstantiationException
from hydra.utils import instantiate

from engine.api import MapDataset
from engine_dev.api import SEQUENCE_CLASSES, without_fold_keys
from src.loop import train


def test_pad_collate_pads_to_the_longest_and_reports_lengths_and_mask(make_cfg) -> None:
    batch = [(torch.tensor([5, 6, 7]), 1), (torch.tensor([8]), 0), (torch.tensor([9, 4]), 2)]
    collate = instantiate(make_cfg("collate=pad", "loader.collate_fn.padding_value=-1").loader)
    padded, labels, lengths, mask = collate.collate_fn(batch)
    assert padded.tolist() == [[5, 6, 7], [8, -1, -1], [9, 4, -1]]
    assert padded.dtype == torch.long and labels.dtype == torch.long
    assert labels.tolist() == [1, 0, 2] and lengths.tolist() == [3, 1, 2]
    assert mask.dtype == torch.bool and mask.tolist() == [
        [True, True, True],
        [True, False, False],
        [True, True, False],
    ]


def _sequences(make_cfg, split: str, *overrides: str) -> MapDataset:
    """`split` of dataset=sequences on the demo set, as the config builds it."""
    node = without_fold_keys(make_cfg("dataset=sequences", *overrides).dataset)
    return instantiate(node, split=split, transform=None)


def test_jsonl_sequences_keep_tokens_compact(make_cfg, demo_dir: Path) -> None:
    train_set = _sequences(make_cfg, "train")
    assert train_set.classes == sorted(SEQUENCE_CLASSES) and len(train_set) == 900
    tokens, label = train_set[4]
    first = json.loads((demo_dir / "sequences" / "train.jsonl").read_text().splitlines()[4])
    assert tokens.tolist() == first["tokens"] and train_set.classes[label] == first["label"]
    assert train_set.tokens.ndim == 1 and train_set.vocab_size == int(train_set.tokens.max()) + 1


def test_token_outside_the_train_vocabulary_is_named(make_cfg) -> None:
    with pytest.raises(
        InstantiationException, match=r"val\.jsonl: token id \d+ is outside the train"
    ):
        _sequences(make_cfg, "val", "+dataset.vocab_size=5")


def test_gru_learns_the_demo_sequences(make_cfg) -> None:
    metrics = train(
        make_cfg("experiment=sequence_demo", "loader.batch_size=32", "trainer.max_epochs=6")
    )
    assert metrics["val/acc"] > 0.85, metrics


def test_missing_label_field_is_named(make_cfg) -> None:
    with pytest.raises(
        InstantiationException, match=r"train\.jsonl:1: no or empty 'y' \(dataset\.label_key\)"
    ):
        _sequences(make_cfg, "train", "dataset.label_key=y")
