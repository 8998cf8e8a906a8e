"""The engine's own tests: each builds engine objects directly, on the demo set or generated
inputs, and needs nothing of the template (conf/, src/, train.py)."""
