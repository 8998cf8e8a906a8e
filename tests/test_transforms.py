"""The per-batch normaliser gives the model exactly what the classic float pipeline gives."""

from __future__ import annotations

import pytest
import torch
from hydra.utils import instantiate
from torchvision.transforms import v2

from src.data.transforms import Normalizer


def test_uint8_batch_normalised_once_matches_classic_pipeline() -> None:
    images = torch.randint(0, 256, (4, 3, 10, 12), dtype=torch.uint8)
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    classic = v2.Compose([v2.ToDtype(torch.float32, scale=True), v2.Normalize(mean, std)])
    expected = torch.stack([classic(img) for img in images])
    assert torch.allclose(Normalizer(mean, std)(images), expected, atol=1e-6)


def test_denormalize_inverts_normalize() -> None:
    images = torch.randint(0, 256, (2, 3, 5, 5), dtype=torch.uint8)
    norm = Normalizer([0.5, 0.4, 0.3], [0.2, 0.25, 0.3])
    assert torch.allclose(norm.denormalize(norm(images)), images / 255.0, atol=1e-6)


def test_features_pass_through_without_stats() -> None:
    features = torch.randn(3, 7)
    assert torch.equal(Normalizer(None, None)(features), features)


def test_train_pipeline_keeps_uint8_and_val_is_deterministic(make_cfg) -> None:
    pipelines = instantiate(make_cfg().transforms)
    image = torch.randint(0, 256, (3, 70, 90), dtype=torch.uint8)
    out = pipelines.train(image)
    assert out.dtype == torch.uint8 and out.shape == (3, 48, 48)
    assert torch.equal(pipelines.val(image), pipelines.val(image))


def test_channel_count_mismatch_names_the_fix() -> None:
    grey = torch.zeros(2, 1, 4, 4, dtype=torch.uint8)
    with pytest.raises(ValueError, match=r"3 values but the inputs have 1 channels.*transforms="):
        Normalizer([0.5] * 3, [0.2] * 3)(grey)
