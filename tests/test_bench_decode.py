"""`make bench-decode` on one image per format, one pass, one round: the table's structure, and
the engine decoding each format with the decoder the table names (bench/decode.py checks the
pixels)."""

from __future__ import annotations

import pytest

from bench import decode


def test_the_decode_table_names_the_engines_decoder_per_format(monkeypatch) -> None:
    monkeypatch.setattr(decode, "PASS_S", 0)  # one timed pass per measurement
    with pytest.warns(DeprecationWarning, match="image decoding and encoding capabilities"):
        text = decode.main(["--rounds", "1", "--images", "1", "--no-write"])  # torchvision's row
    rows = {line.split(" (")[0][2:]: line for line in text.splitlines() if " KB) | " in line}
    assert list(rows) == list(decode.FORMATS)
    for fmt, (_, chosen) in decode.FORMATS.items():
        assert rows[fmt].endswith(f" | {chosen} |")
        assert "not available" not in rows[fmt].split(" | ")[3]  # Pillow reads every format
