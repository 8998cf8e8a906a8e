"""Markdown tables of the benchmark and the machine they were measured on."""

from __future__ import annotations

import importlib.metadata
import platform
from pathlib import Path

import psutil

from bench.timing import Results, paired_ratio, spread

HEADER = "| pipeline | images/s | x {ref} | CPU ms / image | first batch, s | peak RSS, MB |"


def pipeline_table(title: str, results: Results, reference: str, ref_label: str) -> str:
    """One section: medians [min-max] and the ratio to `reference` paired per round."""
    lines = [f"**{title}**", "", HEADER.format(ref=ref_label), "|---|---|---|---|---|---|"]
    for name, samples in results.samples.items():
        lines.append(
            f"| {name} | {spread([s.rate for s in samples])} | "
            f"{paired_ratio(results, name, reference):.2f}x | "
            f"{spread([s.cpu_ms for s in samples])} | {spread([s.first_s for s in samples])} | "
            f"{spread([s.peak_mb for s in samples])} |"
        )
    return "\n".join(lines)


def training_table(title: str, results: Results, reference: str) -> str:
    lines = [
        f"**{title}**",
        "",
        "| loop | images/s | x tutorial | data wait | CPU ms / image |",
        "|---|---|---|---|---|",
    ]
    for name, samples in results.samples.items():
        waits = [100 * s.wait_frac for s in samples]
        lines.append(
            f"| {name} | {spread([s.rate for s in samples])} | "
            f"{paired_ratio(results, name, reference):.2f}x | {spread(waits)} % | "
            f"{spread([s.cpu_ms for s in samples])} |"
        )
    return "\n".join(lines)


def value_table(title: str, rows: list[tuple[str, list[float]]]) -> str:
    lines = [f"**{title}**", "", "| measurement | median [min-max] |", "|---|---|"]
    lines += [f"| {name} | {spread(values)} |" for name, values in rows]
    return "\n".join(lines)


def machine() -> str:
    """CPU, cores, memory and the versions that matter."""
    cpu = (
        next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            platform.processor() or "unknown CPU",
        )
        if Path("/proc/cpuinfo").exists()
        else platform.processor()
    )
    memory = psutil.virtual_memory().total / 2**30
    versions = []
    for package in ("torch", "torchvision", "pillow", "numpy", "timm", "nvidia-dali-cuda120"):
        try:
            versions.append(f"{package} {importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{package} not installed")
    return (
        f"{cpu}, {psutil.cpu_count()} cores, {memory:.0f} GiB; Python "
        f"{platform.python_version()}, {', '.join(versions)}"
    )
