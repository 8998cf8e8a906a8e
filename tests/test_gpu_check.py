"""`make gpu-check` on the CPU: the same code on tiny sizes, producing the block's structure
(BENCHMARKS.md is left alone)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bench import gpu_check


@pytest.mark.skipif(torch.cuda.is_available(), reason="on CUDA, make gpu-check is the real run")
def test_the_tiny_check_produces_the_block(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # a BENCHMARKS.md written by mistake would land here
    block = gpu_check.main(["--no-write"])
    assert not (tmp_path / "BENCHMARKS.md").exists()
    lines = block.splitlines()
    assert lines[0].startswith("## GPU check: `make gpu-check` (")
    assert "`python -m bench.gpu_check --tiny` on no CUDA device" in block
    assert "| setting | images/s | data wait, % |" in lines
    settings = [line for line in lines if line.startswith("| dataset.decode_device=")]
    assert len(settings) == 5  # prefetch on/off x pinning on/off, then the batched decode
    assert "loader.pin_memory=True (unset: no CUDA)" in settings[0]
    assert settings[-1].startswith("| dataset.decode_device=main, trainer.device_prefetch=True")
    decode = {line.split(" | ")[0] for line in lines if "decode_jpeg" in line}
    assert len(decode) == 2 and "not available: no CUDA device" in block
