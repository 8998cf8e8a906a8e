"""Tests that start child processes (torchrun jobs, kill -9, signals, launchers, make, a fresh
interpreter): marked `process` by this folder (tests/conftest.py)."""
