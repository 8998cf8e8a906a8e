"""The reference project's mode=train: the engine's Fit and Epoch driven as the docs say."""

from __future__ import annotations

from omegaconf import DictConfig

from engine.runs.fit import Fit
from engine.runs.training_run import TrainingRun
from engine.training.assemble import assemble
from engine.training.optimization import build_optimization
from reference.step import EmaStep


def train(cfg: DictConfig) -> dict[str, float]:
    """Train as `cfg` says; the final metrics back (metrics.json holds them too)."""
    parts = assemble(cfg)
    optimizer, scheduler = build_optimization(cfg.optimizer, cfg.scheduler, parts)
    step = EmaStep(
        parts.model,
        parts.criterion,
        optimizer,
        scheduler,
        parts.precision,
        parts.settings.grad_accum,
    )
    with TrainingRun(cfg, parts, optimizer) as run:
        fit = Fit(run, step)
        for epoch in fit.epochs():
            with epoch:
                for batch in epoch.batches():
                    loss, logits = step.forward(batch)
                    if epoch.finite(loss):
                        step.backward(loss)
                        epoch.count(loss, logits, batch)
                    if epoch.accumulated():
                        step.optimizer_step()
                        epoch.stepped()
            epoch.end(epoch.train_metrics() | epoch.evaluate())
        return fit.finish()
