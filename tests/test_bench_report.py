"""`make bench` bookkeeping: ratios paired per round, and its block in BENCHMARKS.md."""

from __future__ import annotations

from pathlib import Path

from bench.report import END, START, write_block
from bench.timing import Results, Sample, paired_ratio, spread


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
