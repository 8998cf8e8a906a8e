"""Hydra callbacks for multirun sweeps."""
