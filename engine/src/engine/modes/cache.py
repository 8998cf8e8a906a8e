"""`mode=cache` (`make cache`): decode every train and val image once, shrink it to
`cache.short_side` (null: the side the transforms' first Resize or crop asks for) and store its
uint8 pixels (or, with cache.encoding=jpeg, a JPEG of them) for `dataset=cache`
(engine/data/cache_store.py). Resumable: a second run continues an interrupted one; a stale
cache is refused, never mixed."""

from __future__ import annotations

import errno
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from torch.utils.data import Dataset
from torchcodec.encoders import JpegEncoder
from torchvision.transforms import v2

from engine.core import folder_lock, folder_mark
from engine.core.io import output_folder, write_error, write_json
from engine.core.progress import EVERY_S, counted
from engine.data.cache_store import DATA_FILES, OWN_FILES, CacheWriter, is_jpeg_quality
from engine.data.decode import load_sample
from engine.data.loaders import scan_loader
from engine.data.resolve_loader import resolve_loader_settings
from engine.data.samplers import SequentialOrder
from engine.data.splits import build_splits
from engine.data.targets import refuse_multi_label
from engine.data.transforms import Pipelines
from engine.modes.cache_plan import log_plan, side_from_transforms
from engine.modes.inside_data import refuse_inside_the_data
from engine.modes.no_streams import refuse_a_stream
from engine.runs.outputs import save_resolved_config

log = logging.getLogger(__name__)

READ_BATCH = 16  # images per worker task
LOCK = folder_mark.CACHE  # cache.dir's mark, held while a run writes there
WRITER = "mode=cache"
SPLITS = ("train", "val")  # the folders of cache.dir a build writes, one per split
ELSEWHERE = "the cache elsewhere (another cache.dir); a rerun resumes from its last commit"
# what a write of the cache's own files fails with when the disk, not the data, is the cause
WRITE_ERRORS = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC), errno.EFBIG, errno.EROFS}
ENCODINGS = tuple(DATA_FILES)  # raw: HWC uint8 pixels; jpeg: each image re-encoded as a JPEG


@dataclass(frozen=True)
class CacheSettings:
    """The `cache` config group (see engine/conf/cache/default.yaml)."""

    dir: str
    short_side: int | None  # null: from the transforms (engine/modes/cache_plan.py)
    rebuild: bool
    commit_every: int
    encoding: str
    jpeg_quality: int

    def __post_init__(self) -> None:
        for key in ("short_side", "commit_every"):
            value = getattr(self, key)
            if value is None and key == "short_side":
                continue
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"cache.{key}={value!r}: expected an int >= 1.")
        if self.encoding not in ENCODINGS:
            raise ValueError(
                f"cache.encoding={self.encoding!r}: expected one of {', '.join(ENCODINGS)}."
            )
        if not is_jpeg_quality(self.jpeg_quality):
            raise ValueError(
                f"cache.jpeg_quality={self.jpeg_quality!r}: expected an int from 1 to 100."
            )

    def key(self) -> dict:
        """The settings a cache's content depends on (stored in its manifest)."""
        quality = self.jpeg_quality if self.encoding == "jpeg" else None
        return {"short_side": self.short_side, "encoding": self.encoding, "jpeg_quality": quality}


def shrink(image: torch.Tensor, short_side: int) -> torch.Tensor:
    """`image` with its shorter side brought down to `short_side` (smaller ones stay as is)."""
    if min(image.shape[-2:]) <= short_side:
        return image
    return v2.functional.resize(image, [short_side], antialias=True)


def load_shrunk(files: Dataset, index: int, short_side: int) -> torch.Tensor:
    """Image `index` of the image files `files`, decoded (at reduced scale when it is large
    enough) and shrunk to `short_side` (also used by mode=shards)."""
    label = int(files.targets[index])  # type: ignore[attr-defined]
    path = files.get_filename(index)  # type: ignore[attr-defined]
    name = files.classes[label]  # type: ignore[attr-defined]
    limits = files.max_image_pixels, files.max_jpeg_scans  # type: ignore[attr-defined]
    return shrink(load_sample(path, index, name, short_side, *limits), short_side)


class _Shrunk(Dataset):
    """Image `start + i` of `files`, decoded (at reduced scale when it is large enough), shrunk
    and stored as `settings.encoding` says (HWC pixels or JPEG bytes), with height, width and
    label."""

    def __init__(self, files: Dataset, settings: CacheSettings, start: int) -> None:
        self.files, self.settings, self.start = files, settings, start

    def __len__(self) -> int:
        return len(self.files) - self.start  # type: ignore[arg-type]

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int, int, int]:
        index = self.start + i
        label = int(self.files.targets[index])  # type: ignore[attr-defined]
        image = load_shrunk(self.files, index, self.settings.short_side)
        if self.settings.encoding == "jpeg":
            data = JpegEncoder(image).to_tensor(quality=self.settings.jpeg_quality)
        else:
            data = image.permute(1, 2, 0).contiguous()
        return data, image.shape[1], image.shape[2], label


@contextmanager
def writing(root: Path) -> Iterator[None]:
    """cache.dir, mode=cache's own folder (engine/core/folder_mark.py), claimed by this run and
    held while it writes: its mark `.cache.lock` lists the split files a build writes (an
    earlier engine's cache, with no mark, lists them by its split's manifest.json). Another
    writer's folder, or a cache's file name there no mark lists, is refused in one line; so is
    a second build at once, which would append to the same files. Inside a split folder the
    manifest.json also tells the cache's files from others' (engine/data/cache_store.py): the
    folder may be a link to another disk that holds more."""
    files = frozenset(f"{split}/{name}" for split in SPLITS for name in OWN_FILES)
    ours = frozenset(
        f"{split}/{name}"
        for split in SPLITS
        if (root / split / OWN_FILES[0]).is_file()
        for name in OWN_FILES
    )
    problem = folder_mark.owner_problem(root, LOCK, WRITER, files, ours, beside=True)
    if problem is not None:
        raise FileExistsError(f"cache.dir: {problem}; set cache.dir to another folder.")
    try:
        folder_mark.claim(root, LOCK, WRITER, files)
    except folder_lock.FolderBusy as busy:
        raise FileExistsError(
            f"cache.dir: {root} is being written by another mode=cache run ({busy.holder}): "
            "wait for it to end (a rerun then resumes), or set cache.dir to another folder."
        ) from None
    except OSError as err:  # its record could not be written: a full disk
        raise write_error(err, root / LOCK, ELSEWHERE) from err
    try:
        yield
    finally:
        folder_lock.release(root / LOCK)


def write_split(
    files: Dataset,
    folder: Path,
    settings: CacheSettings,
    workers: int,
    context: str | None,
    timeout: float = 0.0,
    every_s: float = EVERY_S,
) -> int:
    """Cache every image of `files` into `folder` (resuming a compatible unfinished build);
    returns how many were written by this call."""
    if len(files) and files.get_filename(0) is None:  # type: ignore[arg-type, attr-defined]
        raise ValueError(
            f"mode=cache reads image files, and {type(files).__name__} has none: use it with "
            "dataset=imagefolder or dataset=csv."
        )
    paths = [files.get_filename(i) for i in range(len(files))]  # type: ignore[arg-type]
    writer = CacheWriter(folder, paths, settings.key(), files.classes, settings.rebuild)  # type: ignore[attr-defined]
    start = writer.done
    batches = scan_loader(
        _Shrunk(files, settings, start), READ_BATCH, list, workers, context, timeout
    )
    try:
        try:
            for batch in counted(
                batches, len(paths) - start, f"cache {folder.name}", READ_BATCH, every_s
            ):
                for data, height, width, label in batch:
                    writer.append(data.numpy(), height, width, label)
                    if writer.done % settings.commit_every == 0:
                        writer.commit()
        finally:
            writer.close()  # commits every complete image, also when a file could not be read
    except OSError as err:  # a full disk: what was committed stays, and a rerun resumes there
        if err.filename is not None or err.errno not in WRITE_ERRORS:
            raise
        raise write_error(err, folder, ELSEWHERE) from err
    return writer.done - start


def cache(cfg: DictConfig) -> dict[str, float]:
    """Cache the train and val splits of the configured dataset; writes metrics.json."""
    start = time.perf_counter()
    out = Path(cfg.paths.output_dir)
    save_resolved_config(cfg, out)
    settings: CacheSettings = instantiate(cfg.cache)
    if settings.encoding == "jpeg":
        log.info(
            "cache.encoding=jpeg is lossy: every image is stored re-encoded as a JPEG of quality "
            "%d (cache.jpeg_quality); cache.encoding=raw keeps the exact pixels.",
            settings.jpeg_quality,
        )
    splits = build_splits(cfg.dataset, Pipelines([], []), folds=False)  # whole, as stored
    refuse_inside_the_data(Path(settings.dir), "cache.dir", cfg.dataset, splits, SPLITS)
    refuse_a_stream(splits, "cache")
    root = output_folder(settings.dir, "cache.dir")
    refuse_multi_label(splits[0], "mode=cache")
    source = "cache.short_side"
    if settings.short_side is None:
        side, source = side_from_transforms(instantiate(cfg.transforms))
        settings = replace(settings, short_side=side)
    log_plan(splits, settings.short_side, source, settings.encoding)  # type: ignore[arg-type]
    loader = resolve_loader_settings(
        instantiate(cfg.loader), splits[0], SequentialOrder, cuda=False
    )
    written = images = 0
    with writing(root):
        for split, files in zip(SPLITS, splits, strict=True):
            written += write_split(
                files,
                output_folder(root / split, f"cache.dir ({split}/)"),
                settings,
                loader.num_workers,
                loader.multiprocessing_context,
                loader.timeout,
                cfg.trainer.log_every_n_seconds,  # progress lines off a terminal
            )
            images += len(files)
    wall = time.perf_counter() - start
    data = DATA_FILES[settings.encoding]
    size = sum((Path(settings.dir) / split / data).stat().st_size for split in SPLITS)
    metrics = {
        "cache/images_per_s": written / wall,
        "cache/images": float(images),
        "cache/written": float(written),
        "cache/mb": size / 2**20,
        "wall_s": wall,
    }
    write_json(out / "metrics.json", metrics)
    log.info(
        "cache: %d images in %s (%s encoding, %d written by this run, %.0f images/s), %.0f MB "
        "of image data; train from it with dataset=cache dataset.root=%s",
        images,
        settings.dir,
        settings.encoding,
        written,
        metrics["cache/images_per_s"],
        metrics["cache/mb"],
        settings.dir,
    )
    return metrics
