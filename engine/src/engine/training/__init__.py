"""The machinery of a training loop: building its parts from the config, the device and its
batches, distributed training, the loop's edges (NaN guard, uneven ranks, stop signals,
profiler) and the evaluation pass."""
