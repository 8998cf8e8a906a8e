"""Where a checkpoint written mid-epoch goes on, on whatever topology the resumed job has.

Every map-style train order is a pure function of (seed, epoch), and each optimizer step of
a global batch G = loader.batch_size x ranks x trainer.grad_accum trains on one contiguous
stretch of it (engine/data/samplers.py). So a checkpoint records how many positions of the
order the job has used (`samples_done`), and any job with the same G goes on from there with
the very same sets of samples per step, on any number of ranks and loader workers. With
another G the steps would hold other samples: refused, unless trainer.resume_granularity=
sample asks to go on from the next unused sample. Every checkpoint also records the
topology, the sampler and the train listing's fingerprint (engine/data/fingerprint.py): a
mid-epoch resume on changed data or with another order is refused, never trained on the
wrong samples. Orders that are not `EpochSampler`s replay their first batches: they go on
with the same number of ranks and the same batch size only. Streams are checked by
engine/runs/stream_resume.py (replayed on the same topology, else their trained samples left
out).
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any

from torch.utils.data import DataLoader

from engine.data.fingerprint import listing_change, listing_fingerprint
from engine.data.samplers import EpochSampler
from engine.runs.run_records import Topology, topology_problem

log = logging.getLogger(__name__)

# the fix for a checkpoint whose record contradicts itself or this run (an edit, a forgery)
FORGED = (
    "a training never writes that (the file was edited or comes from elsewhere): resume from "
    "an earlier step*.pt of the run, or start fresh (trainer.resume=null)."
)


def _sampler(loader: DataLoader) -> dict[str, Any]:
    """What decides the train order besides the epoch: the sampler's kind, seed and draws per
    epoch, sampler=weighted's replacement, and a mix's sources (name, size, weight)."""
    sampler = loader.sampler
    if not isinstance(sampler, EpochSampler):
        seed = getattr(loader.dataset, "seed", None)  # a stream shuffles itself
        return {"kind": type(sampler or loader.dataset).__name__, "seed": seed, "draws": None}
    record = {"kind": type(sampler).__name__, "seed": sampler.seed, "draws": sampler.num_samples}
    if hasattr(sampler, "replacement"):
        record["replacement"] = sampler.replacement
    sources = getattr(loader.dataset, "sources", ())
    if sources:
        total = sum(s.weight for s in sources)  # shares: 1.5 / 0.5 draws as 0.75 / 0.25
        record["sources"] = [[s.name, s.size, round(s.weight / total, 12)] for s in sources]
    return record


def run_record(loader: DataLoader, grad_accum: int, world_size: int) -> dict[str, Any]:
    """What every checkpoint of this run records of its topology, order and data."""
    topology = Topology(world_size, loader.num_workers, loader.batch_size, grad_accum)
    return {
        "topology": asdict(topology),
        "sampler": _sampler(loader),
        "data": listing_fingerprint(loader.dataset),
    }


def check_resume(
    state: dict[str, Any],
    now: dict[str, Any],
    granularity: str,
    path: Path,
    stream: bool = False,
    limit: int | None = None,
) -> None:
    """Refuse, in one line naming the keys and the fix, a resume of `state` (from `path`)
    that would train on other samples than the interrupted run: mid-epoch on changed data,
    with another order, or with another global batch (unless `granularity` is "sample");
    an epoch-end checkpoint on changed data goes on with a warning. `now`: run_record's.
    A `stream`'s topology is checked by engine/runs/stream_resume.check_stream_resume;
    `limit` is trainer.limit_train_batches, which counts each rank's batches."""
    mid = state["batches_done"] is not None
    where = f"trainer.resume: {path} stopped mid-epoch {state['epoch']}"
    change = listing_change(state["data"], now["data"]) if "data" in state else None
    if change and mid:
        raise ValueError(
            f"{where} on other data: {change}, so the rest of its epoch would train on other "
            "samples; put the data back as it was, or resume from a checkpoint saved at an "
            "epoch's end."
        )
    if change:
        log.warning("trainer.resume: %s: %s; going on with the data as it is now.", path, change)
    if not mid:
        return
    saved_order, order = state.get("sampler"), now["sampler"]
    if saved_order is not None and any(order.get(k) != v for k, v in saved_order.items()):
        raise ValueError(
            f"{where} drawing {_order(saved_order)}, this run draws {_order(order)}: the rest "
            "of the epoch would hold other samples; resume with that sampler and trainer.seed, "
            "or from a checkpoint saved at an epoch's end."
        )
    here = Topology(**now["topology"])
    saved = saved_topology(state, here)
    problem = topology_problem(asdict(saved))  # an older engine's: from its saved config
    if problem is not None:
        raise ValueError(f"trainer.resume: {path} is malformed: {problem}; {FORGED}")
    samples = state.get("samples_done")
    if samples is None:  # a replayed order: its batches, its ranks
        if not stream:
            _check_replay(saved, here, where)
        return
    if order["draws"] is not None and samples > order["draws"]:
        raise ValueError(
            f"{where} after samples_done={samples}, past the {order['draws']} samples its "
            f"epoch's order draws ({_order(order)}); {FORGED}"
        )
    saved_limit = ((state.get("config") or {}).get("trainer") or {}).get("limit_train_batches")
    cut, saved_cut = _cut(limit, here), _cut(saved_limit, saved)
    if cut != saved_cut:
        raise ValueError(
            f"{where} with its epochs cut after {saved_cut or 'all'} samples (trainer."
            f"limit_train_batches={saved_limit} x loader.batch_size {saved.batch_size} x "
            f"{saved.world_size} rank(s)), this run cuts them after {cut or 'all'} (trainer."
            f"limit_train_batches counts each rank's batches): resume with trainer."
            f"limit_train_batches x loader.batch_size x ranks = {saved_cut or 'all samples'}."
        )
    if saved.global_batch == here.global_batch:
        return
    if granularity == "sample":
        log.warning(
            "%s with a global batch of %s; this run's is %s: going on from the next unused "
            "sample (trainer.resume_granularity=sample), so no sample is lost or repeated "
            "(but for the short last batch loader.drop_last=true drops) and the remaining "
            "steps group the samples differently from an uninterrupted run.",
            where,
            saved.described(),
            here.described(),
        )
        return
    raise ValueError(
        f"{where} with a global batch of {saved.described()}, this run's is "
        f"{here.described()}: its remaining steps would hold other samples. Keep loader."
        f"batch_size x ranks x trainer.grad_accum = {saved.global_batch}, or set "
        "trainer.resume_granularity=sample to go on from the next unused sample (the step "
        "boundaries then move)."
    )


def _cut(limit: int | None, topology: Topology) -> int | None:
    """Samples of the order an epoch trains with trainer.limit_train_batches=`limit`."""
    if limit is None or topology.batch_size is None:
        return None
    return limit * topology.batch_size * topology.world_size


def _order(record: dict[str, Any]) -> str:
    draws = f", {record['draws']} draws" if record.get("draws") is not None else ""
    if "replacement" in record:
        draws += f", replacement={str(record['replacement']).lower()}"
    if "sources" in record:
        mix = ", ".join(f"{name} {size} x {weight:g}" for name, size, weight in record["sources"])
        draws += f", sources {mix}"
    return f"{record['kind']} (seed {record['seed']}{draws})"


def saved_topology(state: dict[str, Any], here: Topology) -> Topology:
    """The topology of the job that wrote `state`: recorded, or (an engine before the record)
    its world size and workers with the batch and accumulation of its saved config."""
    if "topology" in state:
        return Topology(**state["topology"])
    config = state.get("config") or {}
    batch = (config.get("loader") or {}).get("batch_size", here.batch_size)
    accum = (config.get("trainer") or {}).get("grad_accum", here.grad_accum)
    workers = state.get("num_workers", here.num_workers)
    return Topology(state.get("world_size", 1), workers, batch, accum)


def _check_replay(saved: Topology, here: Topology, where: str) -> None:
    """A replayed order goes on with as many ranks, the same per-rank batch and accumulation."""
    then = (saved.world_size, saved.batch_size, saved.grad_accum)
    if then != (here.world_size, here.batch_size, here.grad_accum):
        raise ValueError(
            f"{where} in a job of {saved.world_size} process(es) x loader.batch_size "
            f"{saved.batch_size} x trainer.grad_accum {saved.grad_accum}, this one has "
            f"{here.world_size} x {here.batch_size} x {here.grad_accum}, and its order (a "
            "sampler that is no EpochSampler, or a checkpoint of an older engine) is replayed "
            f"batch by batch: resume with {saved.world_size} process(es), loader.batch_size="
            f"{saved.batch_size} and trainer.grad_accum={saved.grad_accum}, or from a "
            "checkpoint saved at an epoch's end."
        )


def resumed_position(state: dict[str, Any], here: Topology) -> tuple[int, int | None]:
    """(the batch this run numbers its first of the epoch, the positions of the order to
    skip; None: replay that many batches) for a mid-epoch `state`."""
    samples = state.get("samples_done")
    if samples is None or here.batch_size is None:
        return state["batches_done"], None
    return samples // (here.batch_size * here.world_size), samples
