"""What a project's tests use of engine_dev, importable from here alone, stable within the
engine's major version (`pytest_plugins = ("engine_dev.fixtures",)` registers `demo_dir`)."""

from engine_dev.cli import run_script
from engine_dev.demo import make_demo_data
from engine_dev.demo_sequences import SEQUENCE_CLASSES
from engine_dev.fixtures import Labels, demo_dir
from engine_dev.processes import Child, run_child

__all__ = [  # noqa: RUF022 (grouped as engine/docs/engine.md lists them)
    "demo_dir",
    "make_demo_data",
    "Labels",
    "SEQUENCE_CLASSES",
    "run_script",
    "Child",
    "run_child",
]
