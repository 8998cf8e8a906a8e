"""Tests that start child processes: torchrun jobs, kill -9, signals from outside."""
