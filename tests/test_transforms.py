"""The transforms group: the train pipeline keeps uint8 and val is deterministic; the no-flip
and grey presets never mirror, and grey gives the model one channel. (The per-batch
normaliser's values are the engine's to prove: engine/tests/test_buffers.py.)"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate
from torchvision.transforms import v2

from engine_dev.api import load_checkpoint
from src.loop import train


def test_train_pipeline_keeps_uint8_and_val_is_deterministic(make_cfg) -> None:
    pipelines = instantiate(make_cfg().transforms)
    image = torch.randint(0, 256, (3, 70, 90), dtype=torch.uint8)
    out = pipelines.train(image)
    assert out.dtype == torch.uint8 and out.shape == (3, 48, 48)
    assert torch.equal(pipelines.val(image), pipelines.val(image))


def _gradient(channels: int = 3) -> torch.Tensor:
    """A uint8 image that is dark on the left and bright on the right (a mirror swaps them)."""
    row = torch.linspace(0, 255, 96).round().to(torch.uint8)
    return row.expand(channels, 80, 96).contiguous()


def _mirrored(pipeline, draws: int = 200) -> int:
    """How many of `draws` seeded passes of the gradient through `pipeline` come out mirrored."""
    mirrored = 0
    for seed in range(draws):
        torch.manual_seed(seed)
        out = pipeline(_gradient()).float()
        mirrored += int(out[..., 0].mean() > out[..., -1].mean())
    return mirrored


@pytest.mark.parametrize("preset", ["default_noflip", "grey"])
def test_no_flip_presets_never_mirror(make_cfg, preset: str) -> None:
    pipelines = instantiate(make_cfg(f"transforms={preset}").transforms)
    steps = [*pipelines.train.transforms, *pipelines.val.transforms]
    assert not any(isinstance(t, (v2.RandomHorizontalFlip, v2.RandomVerticalFlip)) for t in steps)
    assert _mirrored(pipelines.train) == 0 and _mirrored(pipelines.val) == 0


def test_the_default_pipeline_does_mirror(make_cfg) -> None:
    """The check above can see a flip: the default pipeline mirrors about half the draws."""
    assert 60 < _mirrored(instantiate(make_cfg().transforms).train) < 140


def test_grey_gives_the_model_one_channel(make_cfg, caplog) -> None:
    cfg = make_cfg("transforms=grey", "debug=fast")
    if "input_shape" not in cfg.model.keys():  # noqa: SIM118 (a ??? value is not `in`)
        pytest.skip("the default model takes no input_shape: it is built for RGB images")
    pipelines = instantiate(cfg.transforms)
    image = _gradient()
    assert pipelines.train(image).shape == pipelines.val(image).shape == (1, 48, 48)
    with caplog.at_level(logging.INFO, logger="engine"):  # its model summary
        train(cfg)  # the demo images decode to RGB and are trained on as one channel
    assert "| input (1, 48, 48) |" in caplog.text  # the model's input_shape, from the data
    run = Path(cfg.paths.output_dir)
    assert list(
        load_checkpoint(run / "checkpoints" / "last.pt")["config"]["model"]["input_shape"]
    ) == [1, 48, 48]
