"""mode=train: the training loop, on one page. Build the parts, open the run (its dir, the
loggers, the checkpoint to resume), then every epoch: the train step (src/step.py) over the
train loader, the epoch's train/* and val/* metrics, and its end (logging, checkpoint).

The engine's `Fit` and `Epoch` (engine/runs/fit.py) keep what a loop must get right behind
the calls below: where a resumed epoch goes on, stop signals (checkpoint, then exit), NaN
losses skipped on every DDP rank alike, uneven DDP ranks, checkpoints only at a step's
boundary. Change the step, the order, what is evaluated (e.g. `epoch.evaluate(ema_model)`)
or add your own logging (`run.loggers.scalars(...)`) here.
"""

from __future__ import annotations

import time

from omegaconf import DictConfig

from engine.api import Fit, TrainingRun, assemble, build_optimization
from src.step import TrainStep


def train(cfg: DictConfig) -> dict[str, float]:
    """Train and evaluate as `cfg` says; returns the final metrics (also in metrics.json).
    Under torchrun every rank trains; rank 0 alone writes the run's files."""
    start = time.perf_counter()
    parts = assemble(cfg)  # seeded: datasets, loaders, model (DDP under torchrun), loss, metrics
    optimizer, scheduler = build_optimization(cfg.optimizer, cfg.scheduler, parts)
    accum = parts.settings.grad_accum
    step = TrainStep(parts.model, parts.criterion, optimizer, scheduler, parts.precision, accum)
    with TrainingRun(cfg, parts, optimizer) as run:  # the run dir, loggers, checkpoints/
        fit = Fit(run, step, start)  # resumed where trainer.resume says
        for epoch in fit.epochs():  # to max_epochs, or early stopping
            with epoch:  # a stop signal: checkpoint, exit; a dead worker: its file named
                for batch in epoch.batches():  # a resumed epoch goes on at its batch
                    # Under torchrun, finite() and stepped() are collectives: every rank calls
                    # them for every batch, so never `continue` before them (the others would
                    # wait forever); skip work inside the `if` instead.
                    loss, logits = step.forward(batch)
                    if epoch.finite(loss):  # COLLECTIVE: a NaN loss skips the step on every rank
                        step.backward(loss)
                        epoch.count(loss, logits, batch)  # train/* sums, the loss window
                    if epoch.accumulated():  # trainer.grad_accum batches since the last step
                        step.optimizer_step()
                        epoch.stepped()  # COLLECTIVE: train/loss points, a checkpoint when due
            # train_metrics() calls step.optimizer_step() itself for a last, partial
            # accumulation group, then gathers train/* over the ranks: COLLECTIVE, as are
            # evaluate() (val/* over the ranks) and end() (every rank's bad samples shared)
            epoch.end(epoch.train_metrics() | epoch.evaluate())  # log, checkpoint, history
        return fit.finish()  # metrics.json, the loggers' end (HParams, ...)
