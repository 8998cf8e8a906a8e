"""Measuring the pipeline: one way to time batches, and the CPU and memory of the worker tree."""
