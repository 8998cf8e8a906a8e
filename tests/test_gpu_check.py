"""`make gpu-check` on the CPU: the same code on tiny sizes, producing the block's structure
(BENCHMARKS.md is left alone); once as it runs here (no compiled rows, their reason given) and
once with the compiled rows, torch.compile stubbed (a real compile takes ~30 s on 2 cores)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bench import gpu_check, gpu_model


@pytest.mark.skipif(torch.cuda.is_available(), reason="on CUDA, make gpu-check is the real run")
@pytest.mark.parametrize("compiled", [False, True], ids=["as-here", "compiled-rows"])
def test_the_tiny_check_produces_the_block(monkeypatch, tmp_path: Path, compiled: bool) -> None:
    monkeypatch.chdir(tmp_path)  # a BENCHMARKS.md written by mistake would land here
    if compiled:  # the compiled rows' code, without inductor's compile
        monkeypatch.setattr(gpu_check, "compile_reason", lambda device: None)
        monkeypatch.setattr(gpu_model, "compile_model", lambda model, mode: model)
        monkeypatch.setattr(gpu_model, "compile_threads", lambda mode, threads: None)
    block = gpu_check.main(["--no-write", "--out", "block.md"])
    assert not (tmp_path / "BENCHMARKS.md").exists()
    assert (tmp_path / "block.md").read_text() == block + "\n"
    lines = block.splitlines()
    assert lines[0].startswith("## GPU check: `make gpu-check` (")
    assert "`python -m bench.gpu_check --tiny` on no CUDA device" in block
    assert gpu_check.DALI in lines

    table = lines.index("| setting | images/s | data wait, % | of ceiling |")
    rows = [line.split(" | ") for line in lines[table + 2 : lines.index("", table)]]
    names = [row[0].removeprefix("| ") for row in rows]
    assert names[0] == "ceiling: the model alone, on batches already on the device"
    assert rows[0][3] == "1.00 |" and all(len(row) == 4 for row in rows)
    fed = [name for name in names if name.startswith("dataset.decode.device=")]
    workers = [name.split("loader.num_workers=")[1] for name in fed if "=cpu," in name]
    assert {"1", "2"} <= set(workers) and any(w.startswith("auto (=") for w in workers)
    assert "dataset.decode.device=main, loader.num_workers=2" in fed  # the batched decode
    assert "loader.num_workers=auto resolved to " in block

    compiled_rows = [name for name in names if "trainer.compile=default" in name]
    if compiled:
        assert compiled_rows == [
            "ceiling, trainer.compile=default",
            "dataset.decode.device=cpu, loader.num_workers=2, trainer.compile=default",
        ]
        assert "ms compiled (medians); compiling cost " in block
    else:
        assert not compiled_rows
        assert f"torch.compile rows: {gpu_model.CPU_REASON}." in lines

    stages = lines.index(
        "| setting | wait, ms/batch | h2d, ms/batch | step, ms/batch | read, ms/image | "
        "decode, ms/image | transform, ms/image | collate, ms/image |"
    )
    staged = [line.split(" | ") for line in lines[stages + 2 : stages + 2 + len(fed)]]
    assert [row[0].removeprefix("| ") for row in staged] == fed  # every fed row, no ceiling
    assert all(len(row) == 8 and row[3] != "-" for row in staged)  # each has a step time

    decode = {line.split(" | ")[0] for line in lines if "decode_jpeg" in line}
    assert len(decode) == 2 and "not available: no CUDA device" in block
    assert any(line.startswith("| val pixels: dataset.decode.device=main") for line in lines)
