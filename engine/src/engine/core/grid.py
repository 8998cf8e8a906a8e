"""Image grids whose tiles carry a caption (the class name; true and predicted labels)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFont

LINE_PX = 12  # height of one caption line under a tile, pixels
PAD = 2  # pixels around each tile and its caption


def _fit(draw: ImageDraw.ImageDraw, text: str, width: int, font: ImageFont.ImageFont) -> str:
    """`text`, cut and ended with '…' when it is wider than `width` pixels."""
    if draw.textlength(text, font=font) <= width:
        return text
    while text and draw.textlength(text + "…", font=font) > width:
        text = text[:-1]
    return text + "…"


def labelled_grid(
    images: torch.Tensor, captions: Sequence[str], columns: int = 8, tile: int = 96
) -> torch.Tensor:
    """`images` (N x C x H x W in [0, 1], C 1 or 3) as one RGB grid (3 x H' x W' in [0, 1]),
    each tile `tile` pixels wide (small images scaled up without smoothing) over its caption
    (`captions[i]`, lines split at '\\n')."""
    if len(captions) != len(images):
        raise ValueError(f"{len(images)} images but {len(captions)} captions")
    n, _, height, width = images.shape
    tile_h = max(1, round(tile * height / width))
    lines = max(caption.count("\n") + 1 for caption in captions)
    cell_w, cell_h = tile + 2 * PAD, tile_h + lines * LINE_PX + 2 * PAD
    columns = min(columns, n)
    canvas = Image.new("RGB", (columns * cell_w, math.ceil(n / columns) * cell_h), "white")
    draw = ImageDraw.Draw(canvas)
    font = ImageFont.load_default()
    pixels = (images.detach().float().cpu().clamp(0, 1) * 255).round().to(torch.uint8)
    pixels = pixels.expand(-1, 3, -1, -1) if pixels.shape[1] == 1 else pixels
    for i, (image, caption) in enumerate(zip(pixels, captions, strict=True)):
        x, y = (i % columns) * cell_w + PAD, (i // columns) * cell_h + PAD
        scaling = Image.Resampling.NEAREST if tile >= width else Image.Resampling.BILINEAR
        tile_image = Image.fromarray(image.permute(1, 2, 0).numpy()).resize((tile, tile_h), scaling)
        canvas.paste(tile_image, (x, y))
        for j, line in enumerate(caption.split("\n")):
            draw.text((x, y + tile_h + j * LINE_PX), _fit(draw, line, tile, font), "black", font)
    return torch.from_numpy(np.asarray(canvas).copy()).permute(2, 0, 1).float() / 255
