"""The engine's contract: the names a project's own code writes against, importable from here
alone (`from engine.api import Fit, Metric`), stable within a major version; what a project's
tests use besides is `engine_dev.api`. Each is re-exported from where it lives, which keeps
working; anything else in `engine` is internal and may change in any release. The classes
conf/ names as `_target_`s are public by that path (engine/docs/engine.md lists them).
tests/test_public_imports.py checks that a project imports nothing else."""

from engine.app import launch, register_resolvers, run
from engine.core.bounds import Count, Fraction, Positive, Share
from engine.core.csv_cells import unescape_cell
from engine.data.datasets.base import DatasetHooks, MapDataset, StreamDataset
from engine.data.datasets.image_files import LabelledImageFiles
from engine.data.decode import read_image
from engine.data.decode_policy import DecodePolicy
from engine.data.sample_ids import Tagged
from engine.data.samplers import EpochSampler
from engine.data.targets import class_counts
from engine.inference import load_model
from engine.measure.stages import timed_stage
from engine.models.weights import load_matching, read_weights
from engine.runs.fit import Epoch, Fit
from engine.runs.loggers.base import Logger, RunContext
from engine.runs.run_state import Step, StepState
from engine.runs.training_run import TrainingRun
from engine.training.assemble import assemble
from engine.training.batches import DeviceBatch
from engine.training.device import Precision
from engine.training.distributed import unwrap
from engine.training.metric import GatheredMetric, Metric
from engine.training.optimization import build_optimization

__all__ = [  # noqa: RUF022 (grouped as engine/docs/engine.md lists them)
    # train.py and the loop (src/loop.py), the step (src/step.py)
    "run",
    "launch",
    "register_resolvers",
    "assemble",
    "build_optimization",
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
    "Tagged",
    "LabelledImageFiles",
    "DecodePolicy",
    "read_image",
    "timed_stage",
    "class_counts",
    "EpochSampler",
    "Metric",
    "GatheredMetric",
    "read_weights",
    "load_matching",
    "Logger",
    "RunContext",
    # a parameter's checked type (the config checker reads it)
    "Positive",
    "Count",
    "Fraction",
    "Share",
    # after training
    "load_model",
    "unescape_cell",
]
