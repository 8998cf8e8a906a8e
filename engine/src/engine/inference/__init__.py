"""Using a trained checkpoint: `load_model(path)` in a notebook, mode=eval and mode=predict."""

from engine.inference.model import load_model

__all__ = ["load_model"]
