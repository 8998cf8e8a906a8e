"""The training loop and everything it writes: metrics, TensorBoard, checkpoints."""
