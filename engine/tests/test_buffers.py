"""The per-batch normaliser: the classic float pipeline's values, inverted by `denormalize`,
features passed through, a channel mismatch named; on the CPU it recycles its output buffers,
never one that is still in use."""

from __future__ import annotations

import psutil
import pytest
import torch
from torchvision.transforms import v2

from engine.data.buffers import BufferPool
from engine.data.transforms import Normalizer
from engine.training.batches import BatchMover

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
CLASSIC = v2.Compose([v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)])


def _batch(seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (4, 3, 8, 6), dtype=torch.uint8, generator=generator)


def _classic(batch: torch.Tensor) -> torch.Tensor:
    return torch.stack([CLASSIC(image) for image in batch])


def test_outputs_held_by_the_caller_are_never_overwritten() -> None:
    norm = Normalizer(MEAN, STD)
    batches = [_batch(i) for i in range(5)]
    outputs = [norm(b) for b in batches]  # all held at once: more than the pool's slots
    for batch, out in zip(batches, outputs, strict=True):
        assert torch.allclose(out, _classic(batch), atol=1e-6)


def test_an_output_saved_by_autograd_survives_the_next_batches() -> None:
    norm = Normalizer(MEAN, STD)
    weight = torch.randn(2, 3, 3, 3, requires_grad=True)
    first = _batch(0)
    loss = torch.nn.functional.conv2d(norm(first), weight).square().sum()  # input saved
    for i in range(1, 5):
        norm(_batch(i))  # released at once: would reuse a buffer if it were free
    loss.backward()
    expected = weight.detach().clone().requires_grad_(True)
    torch.nn.functional.conv2d(_classic(first), expected).square().sum().backward()
    assert torch.allclose(weight.grad, expected.grad, rtol=1e-4, atol=1e-3)


def test_a_released_buffer_is_reused() -> None:
    norm = Normalizer(MEAN, STD)
    out = norm(_batch(0))
    address = out.data_ptr()
    del out
    again = norm(_batch(1))
    assert again.data_ptr() == address
    assert torch.allclose(again, _classic(_batch(1)), atol=1e-6)


def test_channels_last_is_written_directly_and_values_match() -> None:
    mover = BatchMover(torch.device("cpu"), Normalizer(MEAN, STD), channels_last=True)
    batch = _batch(3)
    inputs = mover((batch, torch.zeros(4, dtype=torch.long))).inputs
    assert inputs.is_contiguous(memory_format=torch.channels_last)
    assert torch.allclose(inputs, _classic(batch), atol=1e-6)


def test_pool_gives_each_holder_its_own_memory_and_keeps_at_most_its_slots() -> None:
    pool = BufferPool(slots=2)
    held = [pool.take((3, 4), torch.float32) for _ in range(4)]
    assert len({t.data_ptr() for t in held}) == 4  # each caller got its own memory
    del held
    process = psutil.Process()
    before = process.memory_info().rss
    # 20 shapes of 40 MB, each released at once: above glibc's largest mmap threshold (32 MiB),
    # so memory the pool lets go returns to the system at once and RSS shows what it keeps
    for rows in range(500, 520):
        pool.take((rows, 20_000), torch.float32).fill_(1.0)
    grown = (process.memory_info().rss - before) / 2**20
    assert grown < 130, f"{grown:.0f} MB kept: more than 2 slots of 40 MB (20 shapes: 800 MB)"


def test_batches_of_uneven_sizes_share_the_pool() -> None:
    """on_error=skip leaves batches of every size: a full pool must make room for a new shape
    (the pool once compared tensors of different shapes with == and failed)."""
    norm = Normalizer(MEAN, STD)
    for size in [8, 7, 8, 5, 6, 3, 8, 1, 7, 2, 8, 4]:
        batch = torch.randint(0, 256, (size, 3, 5, 4), dtype=torch.uint8)
        assert torch.allclose(norm(batch), _classic(batch), atol=1e-6)


def test_denormalize_inverts_normalize() -> None:
    images = torch.randint(0, 256, (2, 3, 5, 5), dtype=torch.uint8)
    norm = Normalizer([0.5, 0.4, 0.3], [0.2, 0.25, 0.3])
    assert torch.allclose(norm.denormalize(norm(images)), images / 255.0, atol=1e-6)


def test_features_pass_through_without_stats() -> None:
    features = torch.randn(3, 7)
    assert torch.equal(Normalizer(None, None)(features), features)


def test_channel_count_mismatch_names_the_fix() -> None:
    grey = torch.zeros(2, 1, 4, 4, dtype=torch.uint8)
    with pytest.raises(ValueError, match=r"3 values but the inputs have 1 channels.*transforms="):
        Normalizer([0.5] * 3, [0.2] * 3)(grey)
