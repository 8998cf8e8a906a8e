"""Tooling that make runs: `make upgrade-engine` (upgrade_engine.py, copied into every project)
and, in the template repo only, `make new-project` (new_project.py)."""
