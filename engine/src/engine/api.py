"""The engine's contract: every name a project writes against, importable from here alone
(`from engine.api import Fit, Metric`), stable within a major version. Each is re-exported
from where it lives, which keeps working; anything else in `engine` is internal and may change
in any release. The classes conf/ names as `_target_`s are public by that path
(engine/docs/engine.md lists them). tests/test_public_imports.py checks that a project imports
nothing else."""

from engine.app import launch, register_resolvers, run
from engine.config.choices import config_tree
from engine.core.bounds import Count, Fraction, Positive, Seconds, Seed, Share, Split, Timeout
from engine.core.csv_cells import unescape_cell
from engine.data.bad_samples import BadSample
from engine.data.datasets.base import DatasetHooks, MapDataset, StreamDataset, Transform
from engine.data.datasets.image_files import LabelledImageFiles
from engine.data.decode import read_image, sample_errors
from engine.data.decode_policy import DecodePolicy
from engine.data.encoded import encode_sample
from engine.data.folds import without_fold_keys
from engine.data.sample_ids import Tagged
from engine.data.samplers import EpochSampler
from engine.data.targets import class_counts
from engine.inference import load_model
from engine.inference.labeller import Labeller
from engine.measure.stages import timed_stage
from engine.models.weights import load_matching, read_weights
from engine.modes.pipeline_report import report as pipeline_report
from engine.runs.checkpoint_files import load_checkpoint
from engine.runs.fit import Epoch, Fit
from engine.runs.loggers.base import Logger, RunContext
from engine.runs.run_state import Step, StepState
from engine.runs.sample_log import samples_by_step, uses_by_epoch
from engine.runs.training_run import TrainingRun
from engine.training.assemble import Components, assemble
from engine.training.batches import DeviceBatch, mover_for
from engine.training.device import Precision
from engine.training.distributed import unwrap
from engine.training.evaluate import evaluate
from engine.training.metric import GatheredMetric, Metric, build_metrics
from engine.training.models import build_model
from engine.training.optimization import (
    build_optimization,
    build_optimizer,
    total_optimizer_steps,
)
from engine.training.param_groups import param_groups

__all__ = [  # noqa: RUF022 (grouped as engine/docs/engine.md lists them)
    # train.py and the loop (src/loop.py), the step (src/step.py)
    "run",
    "launch",
    "assemble",
    "Components",
    "build_optimization",
    "build_optimizer",
    "total_optimizer_steps",
    "param_groups",
    "TrainingRun",
    "Fit",
    "Epoch",
    "Step",
    "StepState",
    "DeviceBatch",
    "Precision",
    "unwrap",
    # your own datasets, samplers, models, losses, metrics, loggers
    "MapDataset",
    "StreamDataset",
    "DatasetHooks",
    "Transform",
    "Tagged",
    "LabelledImageFiles",
    "DecodePolicy",
    "BadSample",
    "read_image",
    "sample_errors",
    "encode_sample",
    "timed_stage",
    "without_fold_keys",
    "class_counts",
    "EpochSampler",
    "Metric",
    "GatheredMetric",
    "build_metrics",
    "build_model",
    "read_weights",
    "load_matching",
    "Logger",
    "RunContext",
    # a parameter's checked type (the config checker reads it)
    "Positive",
    "Count",
    "Fraction",
    "Share",
    "Split",
    "Seconds",
    "Timeout",
    "Seed",
    # after training, and tests
    "load_checkpoint",
    "evaluate",
    "mover_for",
    "load_model",
    "Labeller",
    "samples_by_step",
    "uses_by_epoch",
    "unescape_cell",
    "pipeline_report",
    "register_resolvers",
    "config_tree",
]
