"""A training run's files: checkpoints and resuming, the run dir, TensorBoard, history.csv,
metrics.json and the HParams entry."""
