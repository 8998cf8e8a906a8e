"""`mode=validate`: decode every train and val file once, in parallel, and list the unreadable
ones in bad_samples.csv (no model, no training). Fails past `dataset.decode.max_bad_fraction`. A
worker that stalls past `loader.timeout` or dies is named with the files it was reading, as in
a training (engine/data/in_flight.py)."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig

from engine.core.io import write_json
from engine.core.progress import EVERY_S, counted
from engine.data.bad_samples import REPORT_NAME, BadSample, BadSampleLedger
from engine.data.loader_settings import LoaderSettings
from engine.data.loaders import scan_loader
from engine.data.resolve_loader import resolve_loader_settings
from engine.data.samplers import SequentialOrder
from engine.data.seeded import SeededSamples
from engine.data.splits import build_splits
from engine.data.transforms import Pipelines
from engine.data.wrapper import DatasetWrapper
from engine.runs.outputs import save_resolved_config
from engine.training.loader_failures import loader_failures_named

log = logging.getLogger(__name__)

SCAN_BATCH = 64  # indices per worker task


class _Probe(DatasetWrapper):
    """Index -> None if that file decodes, else its `BadSample` (run in loader workers)."""

    draws_random = False  # it decodes only: no transform, nothing to seed

    def __getitem__(self, index: int) -> BadSample | None:
        return self.dataset.check_sample(index)  # type: ignore[attr-defined]


def _bad_only(records: list[BadSample | None]) -> list[BadSample]:
    return [r for r in records if r is not None]


def scan(
    dataset: Any, split: str, settings: LoaderSettings, report: Path, every_s: float = EVERY_S
) -> BadSampleLedger:
    """Decode every sample of `dataset` with `settings.num_workers` processes (started and
    timed out as `settings` say); the ledger of the bad ones."""
    if not dataset.files_checkable:
        raise ValueError(
            f"mode=validate checks image files, and {type(dataset).__name__} has none to check: "
            "use it with dataset=imagefolder or dataset=csv."
        )
    ledger = BadSampleLedger(split, len(dataset), dataset.max_bad_fraction, report, note="")
    probe = SeededSamples(_Probe(dataset), seed=0)  # its workers mark the sample they read
    workers, context = settings.num_workers, settings.multiprocessing_context
    loader = scan_loader(probe, SCAN_BATCH, _bad_only, workers, context, settings.timeout)
    with loader_failures_named(probe):
        for bad in counted(loader, len(dataset), f"validate {split}", SCAN_BATCH, every_s):
            ledger.record(bad)
    return ledger


def validate(cfg: DictConfig) -> dict[str, float]:
    """Scan the train and val splits; write bad_samples.csv and metrics.json, log a summary."""
    start = time.perf_counter()
    out = Path(cfg.paths.output_dir)
    save_resolved_config(cfg, out)
    report = out / REPORT_NAME
    report.unlink(missing_ok=True)  # this run's scan is the whole report
    splits = build_splits(cfg.dataset, Pipelines([], []), folds=False)  # whole, undecoded
    settings = resolve_loader_settings(
        instantiate(cfg.loader), splits[0], SequentialOrder, cuda=False
    )
    ledgers = [
        scan(dataset, split, settings, report, cfg.trainer.log_every_n_seconds)
        for split, dataset in zip(("train", "val"), splits, strict=True)
    ]
    samples = sum(ledger.size for ledger in ledgers)
    bad = sum(ledger.count for ledger in ledgers)
    metrics = {
        "validate/samples": float(samples),
        "validate/bad": float(bad),
        "validate/bad_frac": bad / samples if samples else 0.0,
        "wall_s": time.perf_counter() - start,
    }
    write_json(out / "metrics.json", metrics)
    for ledger in ledgers:
        log.info("validate: %s", ledger.summary())
    for ledger in ledgers:
        ledger.check()
    return metrics
