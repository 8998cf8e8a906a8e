"""Checks on the composed config that run before anything expensive (see validate.py)."""
