"""A split's crops, resizes and flips as one batched op on the device (`dataset.decode.device=
main|cuda`), with each sample's random choices drawn in the worker exactly as the per-sample
pipeline draws them.

A worker knows an image's upright size from its header before anything is decoded, so it can
run the pipeline's draws (torchvision's own `make_params`, under the run's per-sample RNG:
engine/data/seeded.py) on that size alone and send the result with the bytes: one box in the
source image's pixels, a mirror flag and the output size (`Geometry.draw`). The same seed
then gives the same crops whichever process decodes (`decode_device=cpu`, `main` or `cuda`),
and exact resume, the sample log and the mix are untouched. The main process decodes the
batch and resamples every box in one `torchvision.ops.roi_align` call (`resample`).

Why roi_align: with an adaptive grid (ceil(box / output) bilinear samples a bin, averaged) it
filters a downscale as an antialiased resize does and is plain bilinear on an upscale, for a
whole batch of boxes of any size in one kernel. `python -m bench.batched_crops` (photo-like
500x375 images, the same draws) against torchvision's per-sample pipeline: roi_align 0.39
levels apart on average at 224 px (train) and 0.38 (val), 2.1 at 48 px; affine grids with
grid_sample (bilinear, no antialiasing) 0.87, 1.20 and 9.2, aliased. On a CPU torchvision's
roi_align runs on one thread, ~4 ms a 224 px crop: `main` is the GPU path's test bed there,
not a faster CPU path (the workers decode in parallel).

The steps with a batched form are `SUPPORTED`; any other is refused when the loader is made,
in one line naming the entry and the fix, never run per sample behind the user's back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torchvision.ops import roi_align
from torchvision.transforms import InterpolationMode, v2

from engine.data.buffers import BufferPool

SUPPORTED = (v2.RandomResizedCrop, v2.Resize, v2.CenterCrop, v2.RandomHorizontalFlip)
SUPPORTED_NAMES = ", ".join(step.__name__ for step in SUPPORTED)
PADDING_LIMIT = 2.0  # a batch of mixed sizes shares one canvas while it is at most 2x its pixels
CANVAS_BYTES = 1 << 30  # and while its float pixels fit 1 GiB (12 MP photos: 7 to a canvas)


class Plan(NamedTuple):
    """One sample's geometry: the box (x1, y1, x2, y2, in the upright source image's pixels),
    whether the output is mirrored, and the upright size (height, width) it was drawn on."""

    box: tuple[float, float, float, float]
    mirrored: bool
    height: int
    width: int


def resized_size(
    height: int, width: int, size: Sequence[int] | None, max_size: int | None
) -> tuple[int, int]:
    """The (height, width) torchvision's v2 Resize gives an image of `height` x `width`: [h, w]
    as given, [s] the shorter side to s (the longer one rounded down) capped by `max_size`,
    None the longer side to `max_size` (torchvision's _compute_resized_output_size)."""
    if size is not None and len(size) == 2:
        return int(size[0]), int(size[1])
    short, long = (width, height) if width <= height else (height, width)
    if size is None:
        assert max_size is not None  # torchvision's Resize refuses size=None without it
        new_short, new_long = int(max_size * short / long), max_size
    else:
        new_short, new_long = int(size[0]), int(size[0] * long / short)
        if max_size is not None and new_long > max_size:
            new_short, new_long = int(max_size * new_short / new_long), max_size
    new_w, new_h = (new_short, new_long) if width <= height else (new_long, new_short)
    return new_h, new_w


@dataclass
class _View:
    """The image a step sees: `height` x `width` pixels showing the source box `box`,
    mirrored or not."""

    height: int
    width: int
    box: tuple[float, float, float, float]
    mirrored: bool

    def crop(self, top: float, left: float, height: int, width: int) -> None:
        """This view cropped to `height` x `width` at (`top`, `left`) of its own pixels."""
        x1, y1, x2, y2 = self.box
        sx, sy = (x2 - x1) / self.width, (y2 - y1) / self.height
        if self.mirrored:  # the view's column c shows source column x2 - c * sx
            a, b = x2 - (left + width) * sx, x2 - left * sx
        else:
            a, b = x1 + left * sx, x1 + (left + width) * sx
        self.box = (a, y1 + top * sy, b, y1 + (top + height) * sy)
        self.height, self.width = height, width


def _centred(side: int, crop: int) -> int:
    """Where torchvision's center_crop starts a `crop` on a `side`: rounded half to even
    (Python's round, as torchvision); a larger crop pads (crop - side) // 2 before it."""
    return round((side - crop) / 2.0) if crop <= side else -((crop - side) // 2)


def _bilinear(step: Any) -> bool:
    """Whether `step` interpolates bilinearly (torchvision also takes PIL's code 2 for it)."""
    mode = getattr(step, "interpolation", InterpolationMode.BILINEAR)
    return mode in (InterpolationMode.BILINEAR, "bilinear", 2)


def _step_name(key: str, i: int, step: Any) -> str:
    return f"{key}[{i}] ({type(step).__name__})"


@dataclass(frozen=True)
class Geometry:
    """A split's pipeline (config key `key`) as boxes: its steps, checked to have a batched
    form (torchvision's v2 classes themselves: a subclass may draw or paint otherwise), the
    size every output has (None: no steps, the images go as decoded) and whether it
    antialiases."""

    steps: tuple[Any, ...]
    size: tuple[int, int] | None
    key: str
    antialias: bool = True  # False: a step says antialias=False, so bilinear samples alone

    @classmethod
    def of(cls, transform: Callable | None, key: str) -> Geometry:
        """The geometry of `transform` (a split's pipeline, config key `key`, e.g.
        transforms.train); ValueError naming the first step without a batched form."""
        steps = list(getattr(transform, "transforms", [transform] if transform else []))
        size: tuple[int, int] | None = None
        fix = (
            f"the batched path (dataset.decode.device=main|cuda) crops, resizes and flips only "
            f"({SUPPORTED_NAMES}, bilinear): drop it from {key}, or decode in the workers "
            "(dataset.decode.device=cpu), where every transform runs"
        )
        for i, step in enumerate(steps):
            name = _step_name(key, i, step)
            kind = type(step)
            if kind not in SUPPORTED:
                own = next((s for s in SUPPORTED if s.__name__ == kind.__name__), None)
                if own is not None or isinstance(step, SUPPORTED):  # v1's, or a subclass
                    raise ValueError(
                        f"{name} is {kind.__module__}.{kind.__qualname__}, not torchvision."
                        f"transforms.v2's own {(own or kind.__mro__[1]).__name__}, whose draws "
                        f"and pixels the batched path reproduces: {fix}."
                    )
                raise ValueError(f"{name} has no batched form: {fix}.")
            if not _bilinear(step):
                raise ValueError(
                    f"{name}: interpolation={getattr(step.interpolation, 'value', step.interpolation)}"
                    f" has no batched form: {fix}."
                )
            if isinstance(step, v2.RandomResizedCrop | v2.CenterCrop):
                size = cls.size_of(step)
            elif isinstance(step, v2.Resize):
                fixed = step.size is not None and len(step.size) == 2
                size = cls.size_of(step) if fixed else None
        if steps and size is None:
            raise ValueError(
                f"{key}: its images end in sizes that differ per image, which one batch cannot "
                "hold: end it with a crop (CenterCrop, RandomResizedCrop) or a Resize to "
                "[height, width]."
            )
        antialias = all(getattr(step, "antialias", True) is not False for step in steps)
        return cls(tuple(steps), size, key, antialias)

    def draw(self, height: int, width: int) -> Plan:
        """The plan of an upright `height` x `width` image: every random choice drawn from
        torch's RNG as the pipeline itself draws it on an image of that size."""
        view = _View(height, width, (0.0, 0.0, float(width), float(height)), False)
        shape = torch.empty((), dtype=torch.uint8)
        for step in self.steps:
            if isinstance(step, v2.RandomHorizontalFlip):
                if not bool(torch.rand(1) >= step.p):  # as torchvision's random-apply draws
                    view.mirrored = not view.mirrored
            elif isinstance(step, v2.RandomResizedCrop):
                p = step.make_params([shape.expand(3, view.height, view.width)])
                view.crop(p["top"], p["left"], p["height"], p["width"])
                view.height, view.width = self.size_of(step)
            elif isinstance(step, v2.CenterCrop):
                out_h, out_w = self.size_of(step)
                view.crop(_centred(view.height, out_h), _centred(view.width, out_w), out_h, out_w)
            else:  # Resize: the same pixels, another grid
                view.height, view.width = resized_size(
                    view.height, view.width, step.size, step.max_size
                )
        return Plan(view.box, view.mirrored, height, width)

    @staticmethod
    def size_of(step: Any) -> tuple[int, int]:
        """The (height, width) a crop or a Resize to [h, w] gives."""
        return int(step.size[0]), int(step.size[1])

    def stacked(self, images: list[torch.Tensor]) -> torch.Tensor:
        """Images of no pipeline as one batch; ValueError when their sizes differ."""
        sizes = {tuple(image.shape) for image in images}
        if len(sizes) > 1:
            raise ValueError(
                f"{self.key} is empty and the images differ in size ({sorted(sizes)[:2]}...), "
                "which one batch cannot hold: add a Resize to [height, width] or a crop."
            )
        return torch.stack(images)


def _groups(shapes: list[tuple[int, int]]) -> list[list[int]]:
    """Positions that share one canvas: all of them when padding to the largest costs at most
    PADDING_LIMIT x their pixels and the canvas fits CANVAS_BYTES (one call), else runs of
    similar sizes within both (an image alone whatever its size)."""
    order = sorted(range(len(shapes)), key=lambda i: shapes[i])
    groups: list[list[int]] = []
    for i in order:
        group = groups[-1] if groups else None
        if group is not None:
            members = [*group, i]
            height = max(shapes[j][0] for j in members)
            width = max(shapes[j][1] for j in members)
            pixels = sum(shapes[j][0] * shapes[j][1] for j in members)
            padded = len(members) * height * width
            if padded <= PADDING_LIMIT * pixels and 3 * 4 * padded <= CANVAS_BYTES:
                group.append(i)
                continue
        groups.append([i])
    return groups


def _canvas(images: list[torch.Tensor], pool: BufferPool | None) -> torch.Tensor:
    """The images as one float batch, padded to the largest by repeating each one's last row
    and column once (roi_align's bilinear samples reach half a pixel past a box's edge).
    Copied image by image into one allocation: torch.stack of uint8 images on a CPU took
    400 ms for 64 of 500x375 here, against 35 ms for these copies into a `pool`ed buffer (on
    a CPU: fresh pages cost more than the copies, engine/data/buffers.py)."""
    height = max(image.shape[-2] for image in images)
    width = max(image.shape[-1] for image in images)
    equal = all(image.shape == images[0].shape for image in images)
    shape = (len(images), images[0].shape[0], height, width)
    device = images[0].device
    if equal and pool is not None and device.type == "cpu":
        canvas = pool.take(shape, torch.float32)
    else:  # padding is read only where it repeats an edge, but never left uninitialised
        make = torch.empty if equal else torch.zeros
        canvas = make(shape, dtype=torch.float32, device=device)
    for out, image in zip(canvas, images, strict=True):
        h, w = image.shape[-2:]
        out[:, :h, :w].copy_(image)
        if w < width:
            out[:, :h, w].copy_(image[:, :, w - 1])
        if h < height:
            out[:, h, : min(w + 1, width)].copy_(out[:, h - 1, : min(w + 1, width)])
    return canvas


def _outside(plans: list[Plan], size: tuple[int, int], device: torch.device) -> torch.Tensor:
    """(N, 1, H, W) 0 where an output pixel's centre falls outside its image (a crop larger
    than the image: torchvision pads it with zeros), 1 elsewhere."""
    boxes = torch.tensor([p.box for p in plans], dtype=torch.float64)
    sides = torch.tensor([[p.width, p.height] for p in plans], dtype=torch.float64)
    masks = []
    for axis, count in ((1, size[0]), (0, size[1])):  # rows from y, columns from x
        start, stop = boxes[:, axis], boxes[:, axis + 2]
        centres = start[:, None] + (torch.arange(count) + 0.5) * ((stop - start) / count)[:, None]
        masks.append((centres >= 0) & (centres <= sides[:, axis : axis + 1]))
    inside = masks[0][:, :, None] & masks[1][:, None, :]
    return inside[:, None].to(device, torch.float32, non_blocking=True)


def resample(
    images: list[torch.Tensor],
    plans: list[Plan],
    size: tuple[int, int],
    pool: BufferPool | None = None,
    antialias: bool = True,
) -> torch.Tensor:
    """The uint8 batch (N, C, *size) of each image's box resampled to `size`, mirrored where
    its plan says: one roi_align call per canvas (one for a batch of equal sizes), with an
    adaptive grid (`antialias`) or one bilinear sample a pixel; what lies outside an image
    is 0, as torchvision pads."""
    device = images[0].device
    out = torch.empty((len(images), images[0].shape[0], *size), dtype=torch.uint8, device=device)
    for group in _groups([tuple(image.shape[-2:]) for image in images]):
        boxes = torch.tensor(
            [[n, *plans[i].box] for n, i in enumerate(group)], dtype=torch.float32
        ).to(device, non_blocking=True)
        canvas = _canvas([images[i] for i in group], pool)
        pixels = roi_align(canvas, boxes, size, 1.0, -1 if antialias else 1, True)
        kept = [plans[i] for i in group]
        if any(
            p.box[0] < 0 or p.box[1] < 0 or p.box[2] > p.width or p.box[3] > p.height for p in kept
        ):
            pixels = pixels * _outside(kept, size, device)
        mirrored = torch.tensor([p.mirrored for p in kept]).to(device, non_blocking=True)
        pixels = torch.where(mirrored.view(-1, 1, 1, 1), pixels.flip(-1), pixels)
        rows = torch.tensor(group, device=device)
        out[rows] = pixels.round_().clamp_(0, 255).to(torch.uint8)
    return out
