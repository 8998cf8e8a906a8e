"""Validation: the loss and every metric over every val sample, counted exactly once (also when
the ranks of a distributed job each evaluate their share: the sums are added over ranks). A mix
of sources (dataset=mix) is evaluated source by source, each whole: val/<source>/* for each,
and val/* over all of them (the same sums as the concatenated val split's)."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader

from engine.data.batch_stages import Loader
from engine.measure.timing import BatchMeter
from engine.training.batches import BatchMover
from engine.training.device import Precision
from engine.training.distributed import broadcast_module, reduce_totals, unwrap
from engine.training.loader_failures import loader_failures_named
from engine.training.metric import AnyMetric
from engine.training.prefetch import SideStream, device_batches
from engine.training.totals import PassTotals


@torch.no_grad()
def evaluate(
    model: nn.Module,
    loader: DataLoader,
    move: BatchMover,
    precision: Precision,
    criterion: nn.Module,
    metrics: dict[str, AnyMetric],
    limit: int | None = None,
    side: SideStream | None = None,
) -> dict[str, float]:
    """Mean loss and `metrics` over every sample of `loader` (or its first `limit` batches;
    per rank under DDP; moved through `side`'s lookahead when given). All ranks evaluate
    rank 0's model: the one its checkpoint holds. A loader with `per_source` loaders (a mix)
    is evaluated through them, each source capped at `limit` batches."""
    model = unwrap(model)  # no DDP hooks: the ranks' shares may differ by a batch
    broadcast_module(model)  # rank 0's BatchNorm statistics (the weights already agree)
    model.eval()
    totals = PassTotals(move.device, metrics)
    timer = BatchMeter()
    # a mix's val loader evaluates through its sources' (a plain DataLoader has none)
    passes = (loader.per_source if isinstance(loader, Loader) else None) or {"": loader}
    means: dict[str, float] = {}
    for name, source_loader in passes.items():
        own = PassTotals(move.device, metrics) if name else None
        cap = None if limit is None else timer.batches + limit  # the meter counts every pass
        with loader_failures_named(source_loader.dataset):
            for batch in device_batches(timer.timed(source_loader, cap), move, side):
                with precision.autocast():
                    logits = model(batch.inputs, *batch.extras)
                loss = criterion(logits, batch.labels)
                for sums in (totals, own) if own is not None else (totals,):
                    sums.add(loss, logits, batch.labels)
        if own is not None:
            reduce_totals(own)
            means |= own.means(f"val/{name}", f"check source {name!r}'s val split.")
    reduce_totals(totals)
    window = timer.stop(totals.samples)
    means = totals.means("val", "check the val split and trainer.limit_val_batches.") | means
    # val/samples: what the accuracy was measured on (a sweep's noise: engine/sweeps/table.py)
    return means | {"val/samples_per_s": window.samples_per_s, "val/samples": totals.samples}
