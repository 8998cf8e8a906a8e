"""Variable-length token sequences from JSONL files: `{"tokens": [ids...], "label": ...}`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from engine.data.datasets.base import MapDataset
from engine.data.listing import class_list


class JsonlSequences(MapDataset):
    """One split of token sequences; all tokens in one flat int64 array plus offsets.

    Token 0 is reserved for padding; `vocab_size` is the largest id + 1 over the train split.
    """

    draws_random = False  # no transforms: nothing random to seed

    def __init__(
        self,
        split: str,
        train_path: str,
        val_path: str,
        tokens_key: str,
        label_key: str,
        transform: object = None,
        classes: Sequence[str] | None = None,
        vocab_size: int | None = None,
    ) -> None:
        if transform is not None:
            raise ValueError("sequences take no image transforms: use transforms=none.")
        path = Path(train_path if split == "train" else val_path)
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist (dataset.{split}_path).")
        tokens, offsets, labels = [], [0], []
        with open(path, encoding="utf-8") as f:
            for line_number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                where = f"{path}:{line_number}"
                record = json.loads(line)
                seq = record.get(tokens_key)
                if not isinstance(seq, list) or not seq or min(seq) < 1:
                    raise ValueError(
                        f"{where}: {tokens_key!r} must be a non-empty list of "
                        "token ids >= 1 (0 is padding)."
                    )
                label = str(record.get(label_key, "")).strip()
                if not label:
                    raise ValueError(
                        f"{where}: no or empty {label_key!r} (dataset.label_key); "
                        f"fields found: {sorted(record)}."
                    )
                tokens += seq
                offsets.append(len(tokens))
                labels.append((where, label))
        self.tokens = np.asarray(tokens, dtype=np.int64)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.classes = (
            list(classes)
            if classes is not None
            else class_list(
                [label for _, label in labels],
                lambda i: labels[i][0],
                f"field {label_key!r}, dataset.label_key",
            )
        )
        index = {name: i for i, name in enumerate(self.classes)}
        unknown = [(where, label) for where, label in labels if label not in index]
        if unknown:
            raise ValueError(
                f"{unknown[0][0]}: label {unknown[0][1]!r} is not a train class "
                f"{self.classes} (dataset.label_key={label_key!r})."
            )
        self.targets = np.asarray([index[label] for _, label in labels], dtype=np.int64)
        self.vocab_size = vocab_size if vocab_size is not None else int(self.tokens.max()) + 1
        if int(self.tokens.max()) >= self.vocab_size:
            raise ValueError(
                f"{path}: token id {int(self.tokens.max())} is outside the train "
                f"vocabulary (ids < {self.vocab_size})."
            )

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        start, end = self.offsets[index], self.offsets[index + 1]
        return torch.from_numpy(self.tokens[start:end]), int(self.targets[index])
