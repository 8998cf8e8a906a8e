"""Generated hostile inputs: broken and lying images in every format the decoders accept, a
real-looking folder with several unreadable files at once, CSV listings in odd encodings with
malformed rows, and damaged tar shards. Seeded, so a failure
reproduces; written to disk by the tests that use them."""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import shutil
import struct
import tarfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pillow_heif
from PIL import Image

HUGE = 65500  # declared side of the lying headers: 65500^2 x 3 bytes = 12.9 GB if believed
# a lying AVIF's side: past 16384^2, libavif refuses the file on open, before our limit speaks
AVIF_SIDE = 16000


def _image(rng: random.Random) -> Image.Image:
    size = (rng.randrange(9, 70), rng.randrange(9, 70))
    pixels = np.random.default_rng(rng.randrange(2**32)).integers(0, 256, (*size[::-1], 3))
    return Image.fromarray(pixels.astype(np.uint8))


def _save(image: Image.Image, fmt: str, **kwargs: object) -> bytes:
    buffer = io.BytesIO()
    if fmt == "HEIF":  # pillow-heif's writer, without registering its plugin in Pillow
        pillow_heif.from_pillow(image).save(buffer, **kwargs)
    else:
        image.save(buffer, format=fmt, **kwargs)
    return buffer.getvalue()


def _lying_isobmff(data: bytes, side: int) -> bytes:
    """A HEIC or AVIF whose image spatial extent (`ispe`, the size it declares) says side^2."""
    lying = bytearray(data)
    struct.pack_into(">II", lying, lying.index(b"ispe") + 8, side, side)
    return bytes(lying)


def valid_images(rng: random.Random) -> dict[str, bytes]:
    """One small valid file per format and pixel mode the decoders take."""
    img = _image(rng)
    grey16 = Image.fromarray((np.asarray(img.convert("L"), np.uint16) * 257).astype(np.uint16))
    return {
        "jpeg.jpg": _save(img, "JPEG", quality=90),
        "progressive.jpg": _save(img, "JPEG", progressive=True),
        "cmyk.jpg": _save(img.convert("CMYK"), "JPEG"),
        "grey.jpeg": _save(img.convert("L"), "JPEG"),
        "rgb.png": _save(img, "PNG"),
        "grey.png": _save(img.convert("L"), "PNG"),
        "palette.png": _save(img.convert("P"), "PNG"),
        "rgba.png": _save(img.convert("RGBA"), "PNG"),
        "sixteen.png": _save(grey16, "PNG"),
        "lossy.webp": _save(img, "WEBP", quality=80),
        "lossless.webp": _save(img, "WEBP", lossless=True),
        "anim.gif": _save(img.convert("P"), "GIF"),
        "bitmap.bmp": _save(img, "BMP"),
        "scan.tiff": _save(img, "TIFF"),
        "packed.tif": _save(img, "TIFF", compression="tiff_lzw"),
        "portable.ppm": _save(img, "PPM"),
        "photo.heic": _save(img, "HEIF", quality=80),
        "photo.avif": _save(img, "AVIF", quality=80),
    }


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def short_png(width: int = 4, height: int = 4) -> bytes:
    """A 69-byte PNG whose image data holds one row of the `height` its header declares: the
    input that made torchvision's PNG decoder crash the process with SIGSEGV."""
    header = _png_chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    data = _png_chunk(b"IDAT", zlib.compress(b"\x00" + b"\x00" * 3 * width))
    return b"\x89PNG\r\n\x1a\n" + header + data + _png_chunk(b"IEND", b"")


def lying_images(rng: random.Random) -> dict[str, bytes]:
    """Small files whose headers declare HUGE x HUGE pixels (checksums kept valid)."""
    img = _image(rng)
    jpeg = bytearray(_save(img, "JPEG"))
    sof = jpeg.index(b"\xff\xc0")
    jpeg[sof + 5 : sof + 9] = struct.pack(">HH", HUGE, HUGE)
    png = bytearray(_save(img, "PNG"))
    png[16:24] = struct.pack(">II", HUGE, HUGE)
    png[29:33] = struct.pack(">I", zlib.crc32(bytes(png[12:29])))
    bmp = bytearray(_save(img, "BMP"))
    bmp[18:26] = struct.pack("<ii", HUGE, HUGE)
    gif = bytearray(_save(img.convert("P"), "GIF"))
    gif[6:10] = struct.pack("<HH", HUGE, HUGE)
    ppm = b"P6\n%d %d\n255\n" % (HUGE, HUGE) + bytes(300)
    webp = bytearray(_save(img, "WEBP", lossless=True))  # VP8L: 14-bit (size - 1) fields
    bits = (16383) | (16383 << 14) | (webp[24] >> 4 << 28)
    webp[21:25] = struct.pack("<I", bits)
    square = img.resize((64, 64))  # a multiple of the HEVC block: no crop box hides `ispe`
    return {
        "lying.jpg": bytes(jpeg),
        "lying.png": bytes(png),
        "lying.bmp": bytes(bmp),
        "lying.gif": bytes(gif),
        "lying.ppm": ppm,
        "lying.webp": bytes(webp),
        "lying.heic": _lying_isobmff(_save(square, "HEIF"), HUGE),
        "lying.avif": _lying_isobmff(_save(square, "AVIF"), AVIF_SIDE),
        "short.png": short_png(),
        "short_wide.png": short_png(3000, 3000),
    }


def odd_jpegs(rng: random.Random) -> dict[str, bytes]:
    """200 x 200 JPEGs libjpeg refuses though Pillow reads their header: 12-bit precision, and
    a frame of no components."""
    jpeg = bytearray(_save(_image(rng).resize((200, 200)), "JPEG"))
    sof = jpeg.index(b"\xff\xc0")
    twelve, empty = bytearray(jpeg), bytearray(jpeg)
    twelve[sof + 4] = 12
    empty[sof + 9] = 0
    return {"twelve_bit.jpg": bytes(twelve), "no_components.jpg": bytes(empty)}


def truncated_tiff(rng: random.Random) -> bytes:
    """A TIFF cut inside its first directory: Pillow warns `Truncated File Read`, then fails."""
    return _save(_image(rng), "TIFF")[:50]


def tiff_with_a_lying_tag(rng: random.Random) -> bytes:
    """A readable TIFF whose description tag claims 1 MB: Pillow warns and skips the tag."""
    tiff = bytearray(_save(_image(rng), "TIFF", description="x" * 40))
    directory = struct.unpack_from("<I", tiff, 4)[0]
    for entry in range(struct.unpack_from("<H", tiff, directory)[0]):
        at = directory + 2 + 12 * entry
        if struct.unpack_from("<H", tiff, at)[0] == 270:  # ImageDescription: its count
            struct.pack_into("<I", tiff, at + 4, 2**20)
    return bytes(tiff)


def real_large_png(side: int = 20000) -> bytes:
    """A real, valid `side` x `side` PNG (1 bit per pixel, ~50 KB): 1.2 GB once decoded to RGB."""
    return _save(Image.new("1", (side, side)), "PNG")


def mutations(data: bytes, rng: random.Random, count: int) -> Iterator[tuple[str, bytes]]:
    """`count` damaged copies of `data`: truncated at a random offset, random bytes flipped
    (anywhere, or in the header), a run of bytes cut out, or emptied."""
    for i in range(count):
        kind = rng.choice(("truncated", "flipped", "header", "cut", "empty"))
        damaged = bytearray(data)
        if kind == "truncated":
            damaged = damaged[: rng.randrange(1, len(damaged))]
        elif kind == "flipped":
            for _ in range(rng.randrange(1, 9)):
                damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        elif kind == "header":
            for _ in range(rng.randrange(1, 4)):
                damaged[rng.randrange(min(64, len(damaged)))] = rng.randrange(256)
        elif kind == "cut":
            start = rng.randrange(len(damaged))
            del damaged[start : start + rng.randrange(1, 64)]
        else:
            damaged = bytearray()
        yield f"{kind}{i}", bytes(damaged)


ODD_NAMES = ("with space", "ünïcödé", "semi;colon", "quote'd", "-dash", "new\nline", "x" * 120)


def write_images(folder: Path, images: dict[str, bytes], rng: random.Random) -> list[Path]:
    """Write each image under `folder` with an odd stem, some with the wrong suffix; plus one
    name that is not valid UTF-8. Returns the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, (name, data) in enumerate(sorted(images.items())):
        stem, _, suffix = name.rpartition(".")
        if rng.random() < 0.15:
            suffix = rng.choice(("jpg", "png"))  # content and suffix disagree
        path = folder / f"{rng.choice(ODD_NAMES)}_{i}_{stem}.{suffix}"
        path.write_bytes(data)
        paths.append(path)
    raw = bytes(folder) + b"/trunc_\xff_" + str(len(paths)).encode() + b".jpg"
    with open(raw, "wb") as f:  # a file name that is not valid UTF-8
        f.write(next(iter(images.values()))[:40])
    paths.append(Path(raw.decode("utf-8", "surrogateescape")))
    return paths


ENCODINGS = ("utf-8", "utf-8-sig", "latin-1", "cp1252", "utf-16")


def hostile_csvs(rows: list[tuple[str, str]], rng: random.Random) -> dict[str, bytes]:
    """CSV listings (path,label) built from good `rows`, each broken one way or written in
    another encoding: names -> file bytes."""
    header = "path,label"

    def listing(lines: list[str], encoding: str = "utf-8", newline: str = "\n") -> bytes:
        return newline.join([header, *lines, ""]).encode(encoding)

    good = [f"{p},{label}" for p, label in rows]
    accented = [f"{p},café-{label}" for p, label in rows]
    cases = {f"enc_{enc}": listing(accented, enc) for enc in ENCODINGS}  # read as utf-8
    cases |= {
        "unclosed_quote": listing([*good[:2], f'"{rows[2][0]},circle', *good[3:]]),
        "extra_field": listing([*good[:1], f"{rows[1][0]},circle,stray", *good[2:]]),
        "missing_field": listing([*good[:1], rows[1][0], *good[2:]]),
        "nul_byte": listing([*good[:1], f"{rows[1][0]}\0,circle", *good[2:]]),
        "huge_field": listing([*good[:1], f"{'a' * 200_000},circle", *good[2:]]),
        "superscript_label": listing([*good[:1], f"{rows[1][0]},²", *good[2:]]),
        "sparse_ints": listing([f"{p},{[0, 1, 99][i % 3]}" for i, (p, _) in enumerate(rows)]),
        "negative_int": listing([f"{p},{-i}" for i, (p, _) in enumerate(rows)]),
        "float_among_ints": listing([f"{p},{i or '1.0'}" for i, (p, _) in enumerate(rows)]),
        "duplicate": listing([*good, good[0]]),
        "escape_dots": listing([*good[:1], "../../etc/passwd,circle"]),
        "escape_abs": listing([*good[:1], "/etc/passwd,circle"]),
        "escape_home": listing([*good[:1], "~/x.jpg,circle"]),
        "cr_only": listing(good, newline="\r"),
        "crlf": listing(good, newline="\r\n"),
        "blank_lines": listing([good[0], "", "", *good[1:]]),
        "header_only": listing([]),
        "empty_file": b"",
        "binary": bytes(rng.randrange(256) for _ in range(400)),
        "missing_file": listing([*good[:1], "nope/nothing.jpg,circle"]),
    }
    return cases


def tar_of(members: dict[str, bytes], gz: bool = False) -> bytes:
    """A tar shard holding `members` (name: bytes) in order, gzipped when `gz`: the shape the
    shard tests twist (odd member names, classes files, repeated keys)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(buf.getvalue()) if gz else buf.getvalue()


def damaged_shards(shard: bytes, rng: random.Random, count: int) -> dict[str, bytes]:
    """`count` damaged copies of a tar shard (truncated mid-member or on a block boundary,
    bytes flipped in headers or data) plus a member whose header declares a huge size."""
    cases = dict(mutations(shard, rng, count))
    boundary = 512 * rng.randrange(1, len(shard) // 512)
    cases["block_boundary"] = shard[:boundary]
    huge = bytearray(shard)
    huge[124:136] = b"%011o\0" % (2**33)  # first member claims 8 GiB
    huge[148:156] = b"        "
    huge[148:156] = b"%06o\0 " % sum(huge[:512])
    cases["huge_member"] = bytes(huge)
    return cases


def _lies(manifest: dict, shard: str) -> dict[str, object]:
    """Manifests (as JSON values) that lie about `shard` or break the format one way each."""
    entry = manifest["shards"][shard]
    samples, labels = entry["samples"], entry["labels"]

    def lying(**changes: object) -> dict:
        return manifest | {"shards": {shard: entry | changes}}

    return {
        "more_samples": lying(samples=samples + 7, labels=labels + [0] * 7),
        "fewer_samples": lying(samples=samples - 7, labels=labels[:-7]),
        "no_samples": lying(samples=0, labels=[]),
        "huge_samples": lying(samples=10**15),
        "negative_samples": lying(samples=-3),
        "text_samples": lying(samples=str(samples)),
        "bool_samples": lying(samples=True),
        "short_labels": lying(labels=labels[:3]),
        "other_labels": lying(labels=[(label + 1) % 5 for label in labels]),
        "text_labels": lying(labels=["circle"] * samples),
        "null_labels": lying(labels=None),
        "label_past_classes": lying(labels=[10**9] * samples),
        "bad_errors": lying(errors=[["x", 1]]),
        "numeric_label_from": lying(label_from=3),
        "traversal_key": manifest | {"shards": {f"../../{shard}": entry}},
        "absolute_key": manifest | {"shards": {f"/etc/{shard}": entry}},
        "classes_text": manifest | {"classes": "circle"},
        "shards_list": manifest | {"shards": [entry]},
        "entry_list": manifest | {"shards": {shard: [samples]}},
        "no_format": {k: v for k, v in manifest.items() if k != "format"},
        "future_version": manifest | {"version": 99},
        "top_level_list": [manifest],
    }


def hostile_manifests(manifest: bytes, shard: str, rng: random.Random, count: int) -> dict:
    """Damaged (`count` random mutations, deep nesting, not UTF-8) and lying copies of the
    shard manifest `manifest` (shards.json bytes) whose entry `shard` names a real shard:
    names -> file bytes."""
    cases = dict(mutations(manifest, rng, count))
    cases |= {
        name: json.dumps(value).encode()
        for name, value in _lies(json.loads(manifest), shard).items()
    }
    cases["deep_nesting"] = b"[" * 100_000 + b"]" * 100_000
    cases["nan_samples"] = manifest.replace(b'"samples": ', b'"samples": NaN, "x": ', 1)
    cases["latin1"] = manifest.replace(b'"format"', '"förmat"'.encode("latin-1"), 1)
    return cases


def damaged_checkpoints(checkpoint: bytes, rng: random.Random, count: int) -> dict[str, bytes]:
    """`count` randomly damaged copies of a checkpoint file (torch.save's zip): truncated,
    bytes flipped anywhere or in the zip header, runs cut out, emptied."""
    return dict(mutations(checkpoint, rng, count))


def corrupt_tree(demo_dir: Path, dest: Path) -> tuple[Path, set[str]]:
    """Copy demo_dir/imagefolder to `dest` and break three train files: a truncated JPEG, an
    empty file and a text file named .jpg. Returns the root and the three paths."""
    shutil.copytree(demo_dir / "imagefolder", dest)
    train = dest / "train"
    truncated = sorted((train / "circle").glob("*.jpg"))[1]
    data = truncated.read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    empty = sorted((train / "cross").glob("*.jpg"))[0]
    empty.write_bytes(b"")
    text = train / "square" / "notes.jpg"
    text.write_text("not an image, just a note someone saved with the wrong name\n")
    return dest, {str(truncated), str(empty), str(text)}


def _reencoded(data: bytes, fmt: str, mode: str) -> bytes:
    buffer = io.BytesIO()
    Image.open(io.BytesIO(data)).convert(mode).save(buffer, format=fmt)
    return buffer.getvalue()


def real_folder(demo_dir: Path, dest: Path, copies: int = 5) -> tuple[Path, dict[str, str]]:
    """`copies` x the tiny demo train split (mixed JPEG/PNG, grey, palette and CMYK copies,
    names with spaces and accents) plus its val split, with unreadable train files: a
    truncated JPEG, a PNG shorter than its header (the one that crashed torchvision), an empty
    file, text named .jpg, a FIFO, a JPEG declaring 65500x65500 pixels, a dangling symlink, a
    symlink to itself and a truncated file whose name is not UTF-8. Returns the root and
    {bad path: how it is broken}."""
    rng = random.Random(0)
    shutil.copytree(demo_dir / "imagefolder" / "val", dest / "val")
    for source in sorted((demo_dir / "imagefolder" / "train").glob("*/*")):
        folder = dest / "train" / source.parent.name
        folder.mkdir(parents=True, exist_ok=True)
        data = source.read_bytes()
        for copy in range(copies):
            mode, fmt, suffix = rng.choice(
                [
                    ("RGB", None, source.suffix),
                    ("L", "PNG", ".png"),
                    ("P", "PNG", ".png"),
                    ("CMYK", "JPEG", ".jpg"),
                    ("L", "JPEG", ".JPG"),
                ]
            )
            name = f"{rng.choice(['', 'a photo ', 'café_'])}{source.stem}_{copy}{suffix}"
            body = data if fmt is None else _reencoded(data, fmt, mode)
            (folder / name).write_bytes(body)
    circle, cross, square = (dest / "train" / name for name in ("circle", "cross", "square"))
    victim = sorted(circle.glob("*.jpg"))[0]
    bad = {}
    truncated = circle / "truncated.jpg"
    truncated.write_bytes(victim.read_bytes()[:300])
    bad[str(truncated)] = "truncated"
    (cross / "short.png").write_bytes(short_png(40, 40))
    bad[str(cross / "short.png")] = "PNG data shorter than its header"
    (cross / "empty.jpg").write_bytes(b"")
    bad[str(cross / "empty.jpg")] = "empty"
    (square / "notes.jpg").write_text("not an image\n")
    bad[str(square / "notes.jpg")] = "not an image"
    os.mkfifo(square / "pipe.jpg")
    bad[str(square / "pipe.jpg")] = "FIFO"
    (circle / "bomb.jpg").write_bytes(lying_images(rng)["lying.jpg"])
    bad[str(circle / "bomb.jpg")] = "declared size"
    (circle / "gone.png").symlink_to(circle / "deleted.png")
    bad[str(circle / "gone.png")] = "a dangling symlink"
    (cross / "loop.jpg").symlink_to(cross / "loop.jpg")
    bad[str(cross / "loop.jpg")] = "a symlink to itself"
    raw = os.fsencode(square) + b"/trunc_\xff.jpg"
    with open(raw, "wb") as f:
        f.write(victim.read_bytes()[:200])
    bad[os.fsdecode(raw)] = "truncated, name not UTF-8"
    return dest, bad
