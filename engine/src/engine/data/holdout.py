"""A val split held out of one listing (`dataset.val_fraction`): drawn per class from
`dataset.split_seed`, so every class keeps its share and every run of the same listing and
seed draws the same split, and listed in the run dir's split.csv so the draw can be read back.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from engine.core.csv_cells import ESCAPED
from engine.core.io import write_csv

SPLIT_FILE = "split.csv"  # in the run dir: path,label,split per sample of train and val
# ESCAPED, an empty column, marks the file as the project's: dataset=csv unescapes its cells
SPLIT_COLUMNS = ["path", "label", "split", ESCAPED]


def held_out(targets: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """A mask of the samples held out for val: round(fraction x n) of each class of n samples
    (at least 1 when the class has 2 or more, never all of them), drawn by a torch generator
    seeded with `seed` (as dataset=tensor's split is)."""
    generator = torch.Generator().manual_seed(seed)
    mask = np.zeros(len(targets), dtype=bool)
    for label in np.unique(targets):
        members = np.flatnonzero(targets == label)
        if len(members) < 2:
            continue
        n_val = min(max(1, round(len(members) * fraction)), len(members) - 1)
        order = torch.randperm(len(members), generator=generator).numpy()
        mask[members[order[:n_val]]] = True
    return mask


def write_split_file(train: Dataset, val: Dataset, folder: Path) -> Path:
    """`folder`/split.csv: every sample's file, class name and split (train first, then val),
    readable by dataset=csv (dataset.csv=<it>, dataset.root=<the image root>), which takes
    the `'` off the cells that would start a spreadsheet formula (the ESCAPED column)."""
    rows = [
        {"path": files.get_filename(i), "label": files.classes[files.targets[i]], "split": split}  # type: ignore[attr-defined]
        for split, files in (("train", train), ("val", val))
        for i in range(len(files))  # type: ignore[arg-type]
    ]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / SPLIT_FILE
    write_csv(path, SPLIT_COLUMNS, rows)
    return path
