"""Hydra-configured PyTorch data-pipeline template."""
