"""A training's run dir, from its first file to its last: the resolved config, the checkpoint
trainer.resume continues (found, checked and restored), a checkpoints/ folder that is this
run's own (never another run's), the loggers of the `logger` group (TensorBoard by default),
history.csv, and at the end metrics.json. Under torchrun every rank opens one; only rank 0
writes."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from omegaconf import DictConfig
from torch.optim import Optimizer
from torch.utils.data import IterableDataset

from engine.core.io import remove_stale_temporaries
from engine.data.sample_ids import tag_samples
from engine.data.samplers import EpochSampler
from engine.runs.checkpoint_checks import RunShape, problem_with
from engine.runs.checkpoint_files import CheckpointError, Checkpoints, load_checkpoint
from engine.runs.elastic import check_resume, resumed_position, run_record
from engine.runs.history_file import write_history
from engine.runs.hparams import hparams_of, run_choices
from engine.runs.loggers.base import RunContext
from engine.runs.loggers.build import build_loggers
from engine.runs.outputs import (
    record_data_values,
    record_metrics,
    save_resolved_config,
    write_resolved_config,
)
from engine.runs.resume import KEY_FILE, config_key, find_resume_state
from engine.runs.run_dir import claim_run_dir
from engine.runs.run_records import Topology
from engine.runs.run_state import Checkpointer, Progress, StepState
from engine.runs.sample_log import SampleLog
from engine.runs.step_rows import start_with_rows_before
from engine.runs.stream_resume import TrainedSamples, check_stream_resume, left_out
from engine.training.assemble import Components
from engine.training.batches import DeviceBatch, batch_grid
from engine.training.distributed import init_distributed
from engine.training.interrupts import StopRequest
from engine.training.nonfinite import NonFiniteGuard
from engine.training.pipeline_timing import CSV_COLUMNS, CSV_NUMBERS
from engine.training.pipeline_timing import CSV_NAME as PIPELINE_CSV
from engine.training.progress import LossWindow

log = logging.getLogger(__name__)


class TrainingRun:
    """The files of the training `cfg` describes, whose `parts` and `optimizer` are built:
    `checkpoints` (the run's checkpoints/ folder), `loggers` (every logger `cfg.logger` names,
    as one: engine/runs/loggers), `info` (what every checkpoint records besides the state).
    Refuses, before writing anything, a run dir holding another run's checkpoints. A context
    manager: the loggers are closed at the end."""

    def __init__(self, cfg: DictConfig, parts: Components, optimizer: Optimizer) -> None:
        self.ranks = ranks = init_distributed()
        self.parts, self.out = parts, Path(cfg.paths.output_dir)
        self.config = save_resolved_config(cfg, self.out, write=False)  # once the dir is ours
        # of the config as composed (before the data's values), in this job's global batch
        key = config_key(self.config, ranks.world_size)
        record_data_values(self.config, parts)
        every = parts.settings.checkpoint
        # config_resolved.yaml, a checkpoint's config and HParams name the monitor that was used
        given = self.config["trainer"]["checkpoint"]["monitor"]
        self.config["trainer"]["checkpoint"] |= {"monitor": every.monitor, "mode": every.mode}
        folder = self.out / "checkpoints"
        self.checkpoints = Checkpoints(
            folder, every.keep_last, every.monitor, every.mode, write=ranks.is_main
        )
        asked = parts.settings.resume
        fit = RunShape.of(parts.model, optimizer, parts.classes)
        self.resumed = find_resume_state(asked, key, Path(cfg.paths.log_dir), self.out, fit)
        claim_run_dir(self.out, asked, self.resumed, key, self.checkpoints)
        loader, settings = parts.train_loader, parts.settings
        self.record = run_record(loader, settings.grad_accum, ranks.world_size)
        stream = isinstance(loader.dataset, IterableDataset)
        # a stream's samples trained on this epoch, for its mid-epoch checkpoints: it tags
        # them from now on (its loader's collate takes the tags off), as no other use needs
        self.trained = TrainedSamples() if stream else None
        if stream:
            tag_samples(loader.dataset)
        if self.resumed is not None:
            path, state = self.resumed
            granularity, limit = settings.resume_granularity, settings.limit_train_batches
            check_resume(state, self.record, granularity, path, stream, limit)
            check_stream_resume(state, loader, Topology(**self.record["topology"]), path)
        if ranks.is_main:
            log.info(
                "monitor %s (%s) picks best.pt%s: %s",
                every.monitor,
                every.mode,
                " and drives early stopping" if settings.early_stopping.patience else "",
                "set by trainer.checkpoint.monitor"
                if given is not None
                else "the metrics group's first metric (trainer.checkpoint.monitor=null)",
            )
            write_resolved_config(self.config, self.out)
            folder.mkdir(parents=True, exist_ok=True)
            removed = remove_stale_temporaries(folder)
            if removed:
                log.info(
                    "removed %d temporary file(s) of checkpoint writes that were cut short "
                    "(kill -9) from %s",
                    removed,
                    folder,
                )
            (folder / KEY_FILE).write_text(key + "\n")
        # one training, one logged run: what the training logged after the checkpoint (or,
        # starting afresh, anything in this folder) is dropped; the earlier run dir's points
        # are taken over once the checkpoint is restored (resume)
        start = 0 if self.resumed is None else self.resumed[1]["step"] + 1
        params = hparams_of(self.config, *run_choices())
        context = RunContext(self.out, start, cfg, self.config, params)
        self.loggers = build_loggers(cfg, context, enabled=ranks.is_main)
        if parts.settings.pipeline_timing and ranks.is_main:  # pipeline.csv, as samples.csv
            timings = self.out / PIPELINE_CSV
            start_with_rows_before(timings, [timings], list(CSV_COLUMNS), start, CSV_NUMBERS)
        self.samples = None  # trainer.record_samples: samples.csv (off: costs nothing)
        if parts.settings.record_samples:
            self.samples = SampleLog(self.out, parts.train_set, start, ranks.is_main)
        self.profile_dir = self.out / "tensorboard" / "plugins" / "profile"  # trainer.profile
        self.info: dict[str, Any] = {
            "classes": parts.classes,
            "config": self.config,
            "config_key": key,
            "world_size": ranks.world_size,
            "num_workers": parts.train_loader.num_workers,
            **self.record,  # topology, sampler, the train listing's fingerprint
        }

    def resume(self, saver: Checkpointer) -> Progress:
        """Restore the checkpoint trainer.resume found into `saver`'s model, step and
        counters; returns where to go on (the start, when there is none). What the checks
        could not catch (an optimizer or scheduler of another kind) is a CheckpointError
        naming the file."""
        if self.resumed is None:
            return Progress()
        path, state = self.resumed
        try:
            progress = saver.restore(state)
        except (KeyError, IndexError, TypeError, ValueError, RuntimeError, AttributeError) as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else ""
            raise CheckpointError(
                f"trainer.resume: {path} cannot be restored into this run "
                f"({type(err).__name__}: {first})."
            ) from err
        if progress.mid_epoch:  # in this job's batches (another topology: engine/runs/elastic)
            here = Topology(**self.record["topology"])
            progress.batch, progress.samples = resumed_position(state, here)
            progress.trained = left_out(state, self.parts.train_loader, here)
            if self.trained is not None:
                self.trained.load(state, leaving_out=progress.trained is not None)
        best = path.parent / "best.pt"
        if best.is_file() and self._fits(best, state):
            self.checkpoints.adopt_best(best)
        previous = path.parent.parent  # the run dir of the checkpoint, where it is one
        if (path.parent / KEY_FILE).is_file() and previous.resolve() != self.out.resolve():
            self.loggers.resumed(previous)
            if self.samples is not None:
                self.samples.resumed(previous)
        log.info("resumed from %s: epoch %d, batch %d", path, progress.epoch, progress.batch)
        return progress

    def _fits(self, best: Path, resumed: dict[str, Any]) -> bool:
        """Whether the best.pt beside the resumed checkpoint was written by the same run (the
        same saved config, not only the config_key the file declares) and is restorable;
        else it stays where it is, with a warning: a foreign best.pt is never adopted."""
        try:
            state = load_checkpoint(best, mmap=True)
        except CheckpointError as err:
            log.warning("not carrying %s over: %s", best, err)
            return False
        same_run = state.get("config") == resumed.get("config") and state.get(
            "config_key"
        ) == resumed.get("config_key")
        why = problem_with(state) if same_run else "another run wrote it"
        if why is not None:
            log.warning("not carrying %s over into this run: %s", best, why)
        return why is None

    def checkpointer(
        self, step: StepState, guard: NonFiniteGuard, window: LossWindow, stop: StopRequest
    ) -> Checkpointer:
        """The Checkpointer of this run's model and `step` into its checkpoints/ folder, with
        the loggers flushed before every save."""
        every = self.parts.settings.checkpoint
        return Checkpointer(
            self.checkpoints,
            every,
            self.info,
            self.parts.model,
            step,
            guard,
            window,
            stop,
            self.flush,
            self.used,
            self.trained.state if self.trained is not None else lambda epoch: None,
            self.parts.ema,
        )

    def flush(self) -> None:
        """What was logged and recorded so far onto disk (before every save; all ranks)."""
        self.loggers.flush()
        if self.samples is not None:
            self.samples.flush()

    def used(self, batches: int) -> int | None:
        """Positions of the epoch's order the job has used once each rank reached batch
        `batches` of it (None: not an EpochSampler's order, which is replayed)."""
        loader = self.parts.train_loader
        if not isinstance(loader.sampler, EpochSampler) or loader.batch_size is None:
            return None
        return loader.sampler.used(batches, loader.batch_size)

    def record_samples(self, epoch: int, step: int, batch: DeviceBatch) -> None:
        """`batch` is trained on in optimizer step `step` of `epoch`: a row per sample in
        samples.csv (trainer.record_samples), and a stream notes its samples as trained on
        in the epoch (engine/runs/stream_resume.py)."""
        if self.trained is not None:
            self.trained.add(epoch, batch.ids)
        if self.samples is not None:
            self.samples.add(epoch, step, batch)

    def show_batch(self, tag: str, batch: DeviceBatch) -> None:
        """An image batch as the model sees it (de-normalised), each tile over its class name."""
        grid = batch_grid(batch, self.parts.pipelines.normalizer, self.parts.classes)
        if grid is not None:
            self.loggers.image(tag, grid)

    def write_history(self, history: list[dict[str, float]]) -> None:
        """history.csv: one row per epoch so far (rank 0)."""
        if self.ranks.is_main:
            write_history(self.out / "history.csv", history)

    def finish(self, metrics: dict[str, float], steps: int) -> None:
        """The loggers' end (TensorBoard's HParams entry, ...) one step past the training's
        `steps`, metrics.json and the metrics' log line (rank 0)."""
        if self.ranks.is_main:
            self.loggers.finish(metrics, steps + 1)
            record_metrics(self.out, metrics)

    def __enter__(self) -> TrainingRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.loggers.close()
