"""What a project's tests use besides `engine.api`, importable from here alone, stable within
the engine's major version: the demo data and its fixture (`pytest_plugins =
("engine_dev.fixtures",)` registers `demo_dir`), `train.py` in-process or as a child, and the
engine's pieces a test builds a part or reads a run with."""

from engine.config.choices import config_tree
from engine.data.folds import without_fold_keys
from engine.runs.checkpoint_files import load_checkpoint
from engine.runs.sample_log import samples_by_step, uses_by_epoch
from engine.training.batches import mover_for
from engine.training.evaluate import evaluate
from engine.training.metric import build_metrics
from engine.training.models import build_model
from engine.training.optimization import build_optimizer
from engine_dev.cli import run_script
from engine_dev.demo import make_demo_data
from engine_dev.demo_sequences import SEQUENCE_CLASSES
from engine_dev.fixtures import Labels, demo_dir
from engine_dev.processes import Child, run_child

__all__ = [  # noqa: RUF022 (grouped as engine/docs/engine.md lists them)
    # data and processes
    "demo_dir",
    "make_demo_data",
    "Labels",
    "SEQUENCE_CLASSES",
    "run_script",
    "Child",
    "run_child",
    # a part built from the composed config, a run read back
    "config_tree",
    "without_fold_keys",
    "build_model",
    "build_metrics",
    "build_optimizer",
    "mover_for",
    "evaluate",
    "load_checkpoint",
    "samples_by_step",
    "uses_by_epoch",
]
