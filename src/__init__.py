"""The template: yours to edit. Your datasets, models, losses, metrics, the train step and
the training loop; everything else is the engine's (its public API: the engine manual's
engine.md, make docs)."""
