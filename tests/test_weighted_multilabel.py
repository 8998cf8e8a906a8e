"""sampler=weighted on the template's multi-label experiment, with a limited validation (the
orders' own weights and spread: engine/tests/test_multilabel_orders.py)."""

from __future__ import annotations

from src.loop import train


def test_weighted_training_on_the_demo_with_a_limited_validation(make_cfg) -> None:
    cfg = make_cfg(
        "experiment=multilabel_csv", "sampler=weighted", "debug=fast", "loader.batch_size=4"
    )  # 2 val batches of 4: 8 of the 16 val images
    metrics = train(cfg)
    assert metrics["epochs"] == 1 and 0 <= metrics["val/map"] <= 1
