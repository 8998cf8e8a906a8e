"""A class list that cannot train stops the run before any data is read, in one line naming
the key and the fix (the datasets' own checks: engine/tests/test_class_names.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from src.loop import train

MULTI_LABEL = ["dataset.multi_label=true", "loss=bce", "metrics=multilabel"]


@pytest.mark.parametrize("multi_label", [False, True])
def test_an_empty_class_list_stops_the_run_before_any_data_is_read(
    make_cfg, tmp_path: Path, multi_label: bool
) -> None:
    listing = tmp_path / "not_written_yet.csv"  # read, it would be "does not exist"
    keys = ["dataset=csv", f"dataset.csv={listing}", "dataset.classes=[]"]
    cfg = make_cfg(*keys, *(MULTI_LABEL if multi_label else []))
    with pytest.raises(ValueError, match=r"^dataset\.classes=\[\]: no class names") as err:
        train(cfg)
    message = str(err.value)
    assert "\n" not in message and "model would have no outputs" in message
    assert "list the classes" in message and "leave them out (null)" in message
    assert not listing.exists() and not list(Path(cfg.paths.output_dir).glob("*.pt"))
