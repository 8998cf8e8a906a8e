"""Demo variable-length token sequences (JSONL) whose class is decided by their content."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

SEQUENCE_CLASSES = ("alpha", "beta", "gamma")  # label k <-> marker token k + 1
VOCAB_SIZE = 32  # 0 = padding, 1-3 = class markers, 4-31 = filler
MIN_LEN, MAX_LEN = 6, 48


def _sequence(rng: np.random.Generator, label: int) -> list[int]:
    """Filler tokens with markers: the label's marker appears strictly most often."""
    length = int(rng.integers(MIN_LEN, MAX_LEN + 1))
    winner = int(rng.integers(3, 6))
    counts = [winner if k == label else int(rng.integers(0, winner)) for k in range(3)]
    markers = [k + 1 for k, n in enumerate(counts) for _ in range(n)]
    filler = rng.integers(4, VOCAB_SIZE, max(0, length - len(markers))).tolist()
    tokens = np.array(markers + filler)
    rng.shuffle(tokens)
    return tokens.tolist()


def write_sequences(out: Path, n_train: int, n_val: int, rng: np.random.Generator) -> None:
    """`out/train.jsonl` and `out/val.jsonl`: one `{"tokens": [...], "label": name}` per line."""
    out.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("val", n_val)):
        with open(out / f"{split}.jsonl", "w", encoding="utf-8") as f:
            for i in range(n):
                label = i % len(SEQUENCE_CLASSES)
                record = {"tokens": _sequence(rng, label), "label": SEQUENCE_CLASSES[label]}
                f.write(json.dumps(record) + "\n")
