"""Datasets, transforms, samplers and loaders."""
