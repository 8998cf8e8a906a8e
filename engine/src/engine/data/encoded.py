"""Decoding in the main process (`dataset.decode.device=main|cuda`): the workers read each
JPEG's bytes and draw its crop, the main process decodes the whole batch with one TorchCodec
call on the device (batched nvJPEG on a GPU) and resamples every crop in one op
(engine/data/batched_geometry.py). A GPU then decodes and crops what would cost the CPUs most,
and the workers only read files and headers.

A worker checks the image's declared size against `dataset.decode.max_image_pixels` and a JPEG's scans
against `dataset.decode.max_jpeg_scans` before it sends anything (the batched decode has no such
guard), and draws the sample's crop box and flip from the run's per-sample RNG
(engine/data/seeded.py) on the image's upright size, as the per-sample pipeline draws them: the
same seed gives the same crops on every decode device. Other formats than JPEG are decoded in
the worker (the engine's decoder: its guards, Pillow's formats) and join the batch as pixels.
When the batched call fails, each JPEG is decoded alone to name the file that broke it, which
stops the run (`dataset.decode.on_error=raise`) or is left out and listed in bad_samples.csv
(`skip`).
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from PIL import Image
from torch.utils.data import default_collate

from engine.core.text import shown
from engine.data.bad_samples import BadSample, Delivery
from engine.data.batched_geometry import Geometry, Plan, resample
from engine.data.buffers import BufferPool
from engine.data.decode import SampleError, decode_image_bytes, describe_error
from engine.data.image_header import (
    JPEG_MAGIC,
    MAX_JPEG_SCANS,
    check_pixels,
    check_scans,
    jpeg_size,
    open_image,
)
from engine.data.sample_ids import SampleIds, split_ids
from engine.data.targets import label_text
from engine.measure.stages import SUMS, split_times

DECODE_DEVICES = ("cpu", "main", "cuda")  # cpu = each worker decodes its samples (default)
EXIF_ORIENTATION = 0x0112
TURNED = (5, 6, 7, 8)  # EXIF orientations that swap an image's width and height


class Encoded(NamedTuple):
    """One sample's image as sent by a worker: a JPEG's bytes (1-D uint8) or another format's
    pixels (uint8 C x H x W, decoded in the worker), the file they came from, its index, its
    EXIF orientation (1 = upright) and its crop (`Plan`, drawn on the upright size)."""

    data: torch.Tensor
    name: str
    index: int
    orientation: int
    plan: Plan


class EncodedBatch(NamedTuple):
    """A batch of `Encoded` samples, field by field."""

    data: list[torch.Tensor]
    names: list[str]
    indices: list[int]
    orientations: list[int]
    plans: list[Plan]


def check_decode_device(value: str) -> str:
    """`dataset.decode.device`, checked (a GPU must be there for cuda)."""
    if value not in DECODE_DEVICES:
        raise ValueError(
            f"dataset.decode.device={value!r}: expected one of {DECODE_DEVICES} (cpu = the "
            "workers decode; main = the main process, a batch at once; cuda = the GPU)."
        )
    if value == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            "dataset.decode.device=cuda: no CUDA device here; use dataset.decode.device=cpu "
            "(or main, the same batched path on the CPU)."
        )
    return value


def encode_sample(
    data: bytes,
    name: str,
    index: int,
    geometry: Geometry,
    max_pixels: int | None,
    max_scans: int | None = MAX_JPEG_SCANS,
) -> Encoded:
    """What a worker sends for one image: a JPEG's bytes, once their declared size is within
    `max_pixels` and its scans within `max_scans`, or another format decoded here; with its
    orientation and its crop drawn by `geometry` from the current (seeded) RNG."""
    if not data:
        raise ValueError("the file is empty (0 bytes)")
    if data[:2] != JPEG_MAGIC:  # TorchCodec batches JPEGs alone: the rest joins as pixels
        pixels = decode_image_bytes(data, name, None, max_pixels, max_scans)
        return Encoded(pixels, name, index, 1, geometry.draw(*pixels.shape[-2:]))
    width, height = jpeg_size(data)  # the size libjpeg will decode
    check_pixels(width, height, max_pixels)
    check_scans(data, max_scans)  # nvJPEG and libjpeg decode every scan
    # the header only (no pixels), opened under the user's limit, not Pillow's own
    with open_image(data, max_pixels) as img:
        tag = img.getexif().get(EXIF_ORIENTATION, 1)
    # a tag that is no orientation (text, 9) is ignored, as the decoders ignore it
    orientation = tag if isinstance(tag, int) and 1 <= tag <= 8 else 1
    if orientation in TURNED:
        width, height = height, width
    tensor = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    return Encoded(tensor, name, index, orientation, geometry.draw(height, width))


def encoded_collate(samples: list[Any]) -> tuple[Any, ...]:
    """(EncodedBatch, labels): the images as a list (their lengths differ), the labels
    collated as usual."""
    images, labels = zip(*samples, strict=True)
    fields = EncodedBatch(*(list(column) for column in zip(*images, strict=True)))
    return fields, default_collate(list(labels))


def upright(image: torch.Tensor, orientation: int) -> torch.Tensor:
    """`image` (C, H, W) turned as its EXIF `orientation` says (as Pillow's exif_transpose)."""
    turns: dict[int, Callable[[torch.Tensor], torch.Tensor]] = {
        2: lambda x: x.flip(-1),
        3: lambda x: x.flip(-1, -2),
        4: lambda x: x.flip(-2),
        5: lambda x: x.transpose(-1, -2),
        6: lambda x: x.transpose(-1, -2).flip(-1),
        7: lambda x: x.transpose(-1, -2).flip(-1, -2),
        8: lambda x: x.transpose(-1, -2).flip(-2),
    }
    turn = turns.get(orientation)
    return image if turn is None else turn(image)


def _probe_jpeg() -> bytes:
    """A 16 x 8 JPEG, black left and white right, tagged mirrored (orientation 2)."""
    pixels = Image.new("RGB", (16, 8))
    pixels.paste((255, 255, 255), (8, 0, 16, 8))
    exif = pixels.getexif()
    exif[EXIF_ORIENTATION] = 2
    out = io.BytesIO()
    pixels.save(out, "JPEG", quality=95, exif=exif.tobytes())
    return out.getvalue()


def decoder_turns_upright(device: torch.device) -> bool:
    """Whether TorchCodec's batched JPEG decode on `device` already applies EXIF orientation
    (its CPU decoder does): decoded, the mirrored probe is white on the left."""
    from torchcodec.decoders import decode_jpeg

    probe = torch.frombuffer(bytearray(_probe_jpeg()), dtype=torch.uint8)
    (image,) = decode_jpeg([probe], device=device)
    return bool(image[:, :, :4].float().mean() > 127)


@dataclass
class BatchDecoder:
    """Decodes `EncodedBatch`es on `device` and resamples each sample's crop (`geometry`,
    engine/data/batched_geometry.py) into one uint8 batch; `skip` (dataset.decode.on_error=skip)
    leaves unreadable samples out, named by their `classes` in bad_samples.csv; `max_pixels`
    and `max_scans` are the limits of a JPEG decoded alone (dataset.decode.max_image_pixels,
    dataset.decode.max_jpeg_scans). `seconds` sums the main process's time in the decode and the
    resample (`transform`) since `take_seconds` last read it, for the limiting-stage line."""

    device: torch.device
    geometry: Geometry
    max_pixels: int | None
    skip: bool
    classes: list[str]
    max_scans: int | None = MAX_JPEG_SCANS

    def __post_init__(self) -> None:
        self._turned = decoder_turns_upright(self.device)
        # on a GPU, the decode and the resample run on a stream of their own, beside the
        # model's compute; the batch is used on the caller's stream once they are done
        cuda = self.device.type == "cuda"
        self._stream = torch.cuda.Stream(self.device) if cuda else None
        self._pool = BufferPool()
        self.seconds = {"decode": 0.0, "transform": 0.0}
        self.batches = 0

    def take_seconds(self) -> tuple[int, dict[str, float]]:
        """(batches, seconds by stage) since the last call, and start anew."""
        taken = self.batches, dict(self.seconds)
        self.seconds = dict.fromkeys(self.seconds, 0.0)
        self.batches = 0
        return taken

    def _on_stream(self) -> Any:
        return torch.cuda.stream(self._stream) if self._stream is not None else nullcontext()

    def _jpegs(self, batch: EncodedBatch, at: list[int]) -> dict[int, torch.Tensor]:
        """The JPEGs at positions `at`, decoded in one call; {} when the call fails."""
        from torchcodec.decoders import decode_jpeg

        if not at:
            return {}
        try:
            with self._on_stream():
                images = decode_jpeg([batch.data[i] for i in at], device=self.device)
        except (RuntimeError, ValueError):
            return {}  # one bad file spoils the call: each is decoded alone below
        if not self._turned:
            images = [upright(x, batch.orientations[i]) for x, i in zip(images, at, strict=True)]
        return dict(zip(at, images, strict=True))

    def _error(self, batch: EncodedBatch, i: int, reason: str) -> SampleError:
        return SampleError(
            f"cannot decode sample {batch.indices[i]} from {shown(batch.names[i])}: {reason}. "
            "Fix or remove the file, or set dataset.decode.on_error=skip to leave unreadable files "
            "out (listed in bad_samples.csv)."
        )

    def _alone(self, batch: EncodedBatch, i: int) -> torch.Tensor:
        """Sample `i` decoded alone: a JPEG by the engine's decoder on the CPU, another format
        as the worker decoded it; SampleError if not, or if it is not the size its crop was
        drawn on (a header that lies)."""
        try:
            data = batch.data[i]
            if data.ndim == 1:  # a JPEG's bytes
                raw = bytes(data.numpy())
                data = decode_image_bytes(
                    raw, batch.names[i], None, self.max_pixels, self.max_scans
                )
        except Exception as err:  # re-raised naming the file and the fix
            raise self._error(batch, i, describe_error(err)) from err
        return data.to(self.device, non_blocking=True)

    def _checked(self, batch: EncodedBatch, i: int, image: torch.Tensor) -> torch.Tensor:
        """`image` once it has the size its crop was drawn on. A JPEG whose orientation the
        decoder did not read where Pillow did (an XMP segment before the EXIF one) comes out
        unturned: it is turned as Pillow read it, the orientation its crop was drawn for."""
        plan, shape = batch.plans[i], tuple(image.shape[-2:])
        drawn, swapped = (plan.height, plan.width), (plan.width, plan.height)
        if batch.orientations[i] in TURNED and shape != drawn and shape == swapped:
            image = upright(image, batch.orientations[i])
        if tuple(image.shape[-2:]) != drawn:
            raise self._error(
                batch,
                i,
                f"it decodes to {image.shape[-2]}x{image.shape[-1]} pixels but its header "
                f"declares {drawn[0]}x{drawn[1]}, the size its crop was drawn on",
            )
        return image

    def _decoded(self, batch: EncodedBatch) -> tuple[list[torch.Tensor | None], list[str]]:
        """Every sample decoded (None where it failed under skip) and each failure's reason."""
        jpegs = [i for i, data in enumerate(batch.data) if data.ndim == 1]
        done: dict[int, torch.Tensor] = self._jpegs(batch, jpegs)
        images: list[torch.Tensor | None] = []
        reasons = [""] * len(batch.data)
        for i in range(len(batch.data)):
            try:
                image = done[i] if i in done else self._alone(batch, i)
                images.append(self._checked(batch, i, image))
            except SampleError as err:
                if not self.skip:
                    raise
                images.append(None)
                reasons[i] = describe_error(err.__cause__ or err)
        return images, reasons

    def _resampled(self, images: list[torch.Tensor], plans: list[Plan]) -> torch.Tensor:
        """The batch of every image's crop, usable on the caller's current stream."""
        with self._on_stream():
            if self.geometry.size is None:  # no pipeline: the images as decoded
                done = self.geometry.stacked(images)
            else:
                size, antialias = self.geometry.size, self.geometry.antialias
                done = resample(images, plans, size, self._pool, antialias)
        if self._stream is not None:
            current = torch.cuda.current_stream(self.device)
            current.wait_stream(self._stream)
            for tensor in (*images, done):  # read on the caller's stream: not reused before
                tensor.record_stream(current)
        return done

    def batch(self, batch: Any) -> tuple[Any, list[BadSample]]:
        """`batch` ((EncodedBatch, labels[, SampleIds])) with its images decoded and
        cropped into one uint8 tensor on the device; the samples left out (skip). The
        workers' stage times go on with it (the decode here counts in the main's `wait`)."""
        batch, times = split_times(batch)
        fields, ids = split_ids(batch)
        encoded, labels = fields[0], fields[1]
        start = time.perf_counter()
        with SUMS.paused():  # the main process's work: its wait, not a worker's stages
            images, reasons = self._decoded(encoded)
        decoded = time.perf_counter()
        self.seconds["decode"] += decoded - start
        self.batches += 1
        keep = [i for i, image in enumerate(images) if image is not None]
        bad = [
            BadSample(
                encoded.indices[i],
                encoded.names[i],
                label_text(labels[i].numpy(), self.classes),
                reasons[i],
            )
            for i in range(len(images))
            if images[i] is None
        ]
        if not keep:
            return None, bad
        with SUMS.paused():
            kept = [images[i] for i in keep]
            stacked = self._resampled(kept, [encoded.plans[i] for i in keep])  # type: ignore[misc]
        self.seconds["transform"] += time.perf_counter() - decoded
        rows = torch.tensor(keep)
        out: tuple[Any, ...] = (stacked, labels[rows], *fields[2:])
        if times is not None:
            out = (*out, times)
        if ids is not None:
            out = (*out, SampleIds([ids.indices[i] for i in keep]))
        return out, bad

    def __call__(self, delivery: Delivery) -> Delivery:
        """The loader's stage (engine/data/batch_stages.py): the delivery with its batch
        decoded and the samples that failed added to its bad ones."""
        if delivery.batch is None:
            return delivery
        batch, bad = self.batch(delivery.batch)
        return Delivery(batch, [*delivery.bad, *bad])
