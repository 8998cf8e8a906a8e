"""Metrics for the `metrics` config group, one module each.

Put yours here: a `Metric` subclass (engine/src/engine/training/metric.py says what it implements).
"""
