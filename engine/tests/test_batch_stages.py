"""The loader as composed stages (engine/data/batch_stages.py): the workers' one collate and
the main process's ordered stages, as make_loader composes them."""

from __future__ import annotations

import itertools
import logging
import math
import pickle

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, SequentialSampler, TensorDataset

from engine.data.bad_samples import BadSample
from engine.data.batch_stages import Loader, WorkerCollate
from engine.data.datasets.base import MapDataset
from engine.data.loaders import make_loader
from engine.data.sample_ids import SampleIds, Tagged
from engine.measure.stages import SUMS, StageTimes
from engine.training.batches import BatchMover
from engine.training.device import Precision
from engine.training.distributed import share_bad_samples
from engine.training.evaluate import evaluate
from engine_dev.small_sets import loader_settings


class Flaky(MapDataset):
    """Six samples of a dataset with on_error=skip; samples 2 and 3 are unreadable."""

    on_error, max_bad_fraction = "skip", 0.5

    def __len__(self) -> int:
        return 6

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int] | BadSample:
        if i in (2, 3):
            return BadSample(i, f"/x/{i}.jpg", "cat", "truncated")
        return torch.full((2,), float(i)), i % 2


def _loader(dataset: Dataset, workers: int = 0, **kwargs) -> Loader:
    settings = loader_settings(2, workers)
    return make_loader(dataset, settings, SequentialSampler(dataset), False, **kwargs)


def test_the_workers_collate_sets_bad_records_apart_and_travels_to_workers() -> None:
    bad = [BadSample(i, f"/x/{i}.jpg", "cat", "truncated") for i in range(3)]
    good = [(torch.zeros(3, 2, 2), 1), (torch.ones(3, 2, 2), 0)]
    collate = pickle.loads(pickle.dumps(WorkerCollate(skip=True)))  # as spawned workers get it
    mixed, all_bad = collate([good[0], bad[0], good[1]]), collate(bad[1:])
    assert mixed.bad == [bad[0]] and mixed.batch[0].shape == (2, 3, 2, 2)
    assert all_bad.batch is None and all_bad.bad == bad[1:]


def test_one_collate_takes_bad_samples_tags_and_times_in_order() -> None:
    """Bad samples apart, tags off, the rest collated: fields, then times, then ids."""
    SUMS.enabled = True
    try:
        collate = WorkerCollate(skip=True, tags=True, times=True)
        samples = [
            Tagged((torch.zeros(2), 1), 7),
            BadSample(8, "/x/8.jpg", "cat", "truncated"),
            Tagged((torch.ones(2), 0), 9),
        ]
        batch, bad = collate(samples)
    finally:
        SUMS.enabled = False
    images, labels, times, ids = batch
    assert images.shape == (2, 2) and labels.tolist() == [1, 0]
    assert isinstance(times, StageTimes) and times.samples == 2
    assert isinstance(ids, SampleIds) and ids.indices == [7, 9]
    assert [b.index for b in bad] == [8]


def test_a_batch_of_only_bad_samples_is_left_out_and_each_file_logged_once(caplog) -> None:
    loader = _loader(Flaky())
    with caplog.at_level(logging.WARNING, logger="engine.data.bad_samples"):
        epochs = [list(loader), list(loader), list(itertools.islice(loader, 1, None))]
    assert [len(e) for e in epochs] == [2, 2, 1]  # [0, 1], [4, 5]; [2, 3] was all bad
    assert torch.equal(epochs[0][1][0], torch.tensor([[4.0, 4.0], [5.0, 5.0]]))
    assert loader.bad_samples.count == 2 and len(caplog.records) == 2
    assert loader.dropped_batches == 1  # the last pass's


def test_source_loaders_share_one_ledger() -> None:
    """A mix's per-source loaders count into their split's ledger: each file once."""
    whole = _loader(Flaky())
    source = _loader(Flaky(), bad_samples=whole.bad_samples)
    list(whole), list(source)
    assert source.bad_samples is whole.bad_samples and whole.bad_samples.count == 2


def test_raise_has_no_stages_and_yields_the_plain_batches() -> None:
    flaky = Flaky()
    flaky.on_error = "raise"
    loader = _loader(flaky)
    assert loader.stages == () and loader.bad_samples is None and loader.decoder is None
    assert isinstance(next(iter(loader)), list)  # default_collate's batch, unwrapped


def test_stages_run_alike_in_worker_processes() -> None:
    loader = _loader(Flaky(), workers=2)
    assert [len(b[1]) for b in loader] == [2, 2] and loader.dropped_batches == 1


def test_a_plain_dataloader_is_evaluated_and_timed_as_one_pass() -> None:
    """What reads the engine Loader's fields (evaluate's per-source passes, the epoch's
    dropped batches, the limiting stage's decoder, DDP's ledgers) takes a plain DataLoader
    of the user's as a loader without any: public evaluate() keeps working on one."""
    data = TensorDataset(torch.randn(8, 4), torch.tensor([0, 1] * 4))
    loader = DataLoader(data, batch_size=4)
    cpu = torch.device("cpu")
    move = BatchMover(cpu, lambda inputs, labels: inputs, False)
    means = evaluate(
        nn.Linear(4, 2), loader, move, Precision(cpu, None, None), nn.CrossEntropyLoss(), {}
    )
    assert means["val/samples"] == 8 and math.isfinite(means["val/loss"])
    share_bad_samples(loader)  # no ledger: nothing to share


def test_samples_the_collate_cannot_stack_are_named_with_their_shapes_and_the_fix() -> None:
    """torch's own words (stack expects each tensor to be equal size; in a worker: trying to
    resize storage) name no key; the loader's say the shapes and the keys that fix them."""
    samples = [(torch.zeros(3, 8, 8), 0), (torch.zeros(3, 8, 9), 1)]
    with pytest.raises(ValueError, match=r"^loader\.collate_fn: .*sample 0 is \(3, 8, 8\), its "):
        WorkerCollate()(samples)
    sequences = [(torch.zeros(47), 0), (torch.zeros(45), 1)]
    with pytest.raises(ValueError, match=r"sample 1 \(45,\).*pad token sequences \(collate=pad\)"):
        WorkerCollate()(sequences)

    def broken(batch: list) -> None:
        raise RuntimeError("a collate of the user's failed")

    with pytest.raises(RuntimeError, match=r"^a collate of the user's failed$"):
        WorkerCollate(broken)([(torch.zeros(2), 0), (torch.zeros(2), 1)])  # same shapes: as is
