"""Metrics for the `metrics` config group, one module each (put yours here: a `Metric`
subclass, see base.py)."""
