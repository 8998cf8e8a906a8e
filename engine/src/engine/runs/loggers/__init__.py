"""Where a training's metrics go: the `logger` config group's loggers (TensorBoard, a CSV file,
MLflow, W&B, or your own), several at once, behind one fan-out the loop logs to."""
