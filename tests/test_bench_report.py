"""`make bench` bookkeeping: ratios paired per round, its blocks in BENCHMARKS.md, and the
growth section's tables (on tiny trees)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench import growth, training
from bench.blocks import END, GPU, GROWTH, START, markers, write_block
from bench.timing import Results, Sample, paired_ratio, spread
from src.step import TrainStep


def _sample(rate: float) -> Sample:
    return Sample(rate=rate, cpu_ms=1.0, first_s=0.1, peak_mb=100.0, wait_frac=0.0)


def test_ratios_pair_the_rounds_so_a_slow_round_does_not_skew_them() -> None:
    results = Results()
    for ours, theirs in ((200, 100), (60, 30), (210, 105)):  # round 2: the machine was busy
        results.add("ours", _sample(ours))
        results.add("tutorial", _sample(theirs))
    assert paired_ratio(results, "ours", "tutorial") == 2.0
    assert spread([100.0, 30.0, 105.0]) == "100 [30-105]"


def test_the_block_replaces_only_its_own_text(tmp_path: Path) -> None:
    path = tmp_path / "BENCHMARKS.md"
    path.write_text("# Benchmarks\n\nIntro.\n\n## Older results\n\nkept\n")
    write_block(path, "first run")
    assert path.read_text() == (
        f"# Benchmarks\n\nIntro.\n\n{START}\nfirst run\n{END}\n\n## Older results\n\nkept\n"
    )
    write_block(path, "second run")
    text = path.read_text()
    assert "second run" in text and "first run" not in text
    assert text.count(START) == 1 and text.endswith("## Older results\n\nkept\n")


def test_a_named_block_goes_after_the_bench_block_and_is_replaced_alone(tmp_path: Path) -> None:
    path = tmp_path / "BENCHMARKS.md"
    path.write_text(f"# Benchmarks\n\n{START}\nbench\n{END}\n\n## Older results\n")
    write_block(path, "growth 1", GROWTH)
    start, end = markers(GROWTH)
    assert path.read_text() == (
        f"# Benchmarks\n\n{START}\nbench\n{END}\n\n{start}\ngrowth 1\n{end}\n\n## Older results\n"
    )
    write_block(path, "growth 2", GROWTH)
    write_block(path, "bench 2")
    text = path.read_text()
    assert "growth 2" in text and "bench 2" in text and "growth 1" not in text
    assert text.count(start) == 1 and "\nbench\n" not in text
    write_block(path, "## GPU", GPU)  # a new block goes before the next block, not inside it
    gpu_start, gpu_end = markers(GPU)
    assert f"{gpu_start}\n## GPU\n{gpu_end}\n\n{start}\ngrowth 2\n{end}" in path.read_text()


@pytest.mark.slow  # a fresh process per cell: ~30 s on 2 cores
def test_the_growth_tables_have_every_quantity_side_by_side(monkeypatch) -> None:
    monkeypatch.setattr(growth, "SIZES", (30,))
    monkeypatch.setattr(growth, "CLASSES", 3)
    tables = growth.growth_sections(1, lambda line: None)
    for table, (_, _, reference) in zip(tables, growth.PAIRS.values(), strict=True):
        assert f"| files | measurement | template | {reference} | template / {reference} |" in table
        for _, label in growth.QUANTITIES:
            assert f"| 30 | {label} |" in table


def test_the_training_rows_take_a_step(demo_dir: Path, monkeypatch) -> None:
    # make bench's training section: one step of the template's row on the demo set
    steps = []
    optimizer_step = TrainStep.optimizer_step
    monkeypatch.setattr(
        TrainStep, "optimizer_step", lambda self: (optimizer_step(self), steps.append(self.steps))
    )
    candidate = training.template_training(
        "template",
        "dataset=imagefolder",
        f"dataset.root={demo_dir / 'imagefolder'}",
        "loader.batch_size=4",
        "loader.num_workers=0",
    )
    candidate.finish(next(candidate.start()))
    assert steps == [1]


def test_the_guard_watches_paths_that_exist_and_holds_a_change_to_the_last_release() -> None:
    """A renamed module would leave `make bench-guard` measuring nothing; the release it holds a
    change to is a commit that set the engine's version (its parent had another)."""
    from bench import ab

    assert all((ab.ROOT / path).exists() for path in ab.HOT_PATH), ab.HOT_PATH
    release = ab.last_release()
    version = re.compile(r"^__version__ = .*$", re.M)
    set_there = version.search(ab.git("show", f"{release}:{ab.VERSION_FILE}"))
    before = version.search(ab.git("show", f"{release}~1:{ab.VERSION_FILE}"))
    assert set_there is not None and before is not None and set_there[0] != before[0]
