"""The Hugging Face layout of an image dataset in Parquet, written once for the reader
(dataset=parquet) and the writer (mode=shards shards.format=parquet).

An image is a struct `{bytes: binary, path: string}` (the `Image` feature; plain `binary` is
read too); a label is an integer whose class names the schema's `huggingface` metadata gives
(`ClassLabel`), a string, or a list of either (several labels: `List(ClassLabel)`). The
metadata is the JSON `{"info": {"features": {column: feature}}}` that `datasets` writes beside
the Arrow schema and reads back into its `Features`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pyarrow as pa

METADATA_KEY = b"huggingface"
# what the split names of files look like, as `datasets` tells splits apart by file name
SPLIT_WORDS = {
    "train": ("train", "training"),
    "val": ("validation", "valid", "val", "dev"),
    "test": ("test", "testing"),
}
IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


def features(schema: pa.Schema) -> dict:
    """The `huggingface` features of `schema` (column -> feature), or {} when it has none or
    they do not parse (then the labels' own values name the classes)."""
    raw = (schema.metadata or {}).get(METADATA_KEY)
    if raw is None:
        return {}
    try:
        found = json.loads(raw).get("info", {}).get("features", {})
    except (ValueError, AttributeError):
        return {}
    return found if isinstance(found, dict) else {}


def class_label_names(schema: pa.Schema, column: str) -> list[str] | None:
    """The class names of `column`'s `ClassLabel` (or of the `ClassLabel` a list of labels
    holds), or None when the schema names none."""
    feature = features(schema).get(column)
    if isinstance(feature, dict) and feature.get("_type") in ("List", "Sequence"):
        feature = feature.get("feature")
    if isinstance(feature, dict) and feature.get("_type") == "ClassLabel":
        names = feature.get("names")
        if isinstance(names, list) and all(isinstance(n, str) for n in names):
            return names
    return None


def image_bytes_field(kind: pa.DataType) -> bool | None:
    """How the image column of type `kind` holds encoded bytes: True = a struct's `bytes`
    field (the `Image` feature), False = the column itself (binary); None = neither."""
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return False
    if pa.types.is_struct(kind) and kind.get_field_index("bytes") >= 0:
        inner = kind.field("bytes").type
        if pa.types.is_binary(inner) or pa.types.is_large_binary(inner):
            return True
    return None


def label_kind(kind: pa.DataType) -> str | None:
    """`int`, `str`, `int-list` or `str-list` for a label column of type `kind`; None for a
    type no label can have (floats, structs, ...)."""
    multi = ""
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        kind, multi = kind.value_type, "-list"
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if pa.types.is_integer(kind):
        return f"int{multi}"
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return f"str{multi}"
    return None


def schema_for(classes: Sequence[str], multi_label: bool) -> pa.Schema:
    """The schema of an image dataset written in this layout: `image` and `label` (a list of
    class indices when `multi_label`), with the `huggingface` features that name the classes
    (dataset=parquet's default columns read it as it is)."""
    label: dict = {"names": list(classes), "_type": "ClassLabel"}
    kind = pa.int64()
    if multi_label:
        label, kind = {"feature": label, "_type": "List"}, pa.list_(pa.int64())
    meta = {"info": {"features": {"image": {"_type": "Image"}, "label": label}}}
    return pa.schema(
        [("image", IMAGE_TYPE), ("label", kind)], metadata={METADATA_KEY: json.dumps(meta)}
    )
