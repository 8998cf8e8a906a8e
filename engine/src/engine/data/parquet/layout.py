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
from typing import Annotated, Any, TypedDict

import pyarrow as pa

from engine.core.records import Open, parse_record, problem

METADATA_KEY = b"huggingface"
# what the split names of files look like, as `datasets` tells splits apart by file name
SPLIT_WORDS = {  # datasets' SPLIT_KEYWORDS (datasets/data_files.py), by the template's split
    "train": ("train", "training"),
    "val": ("validation", "valid", "dev", "val"),
    "test": ("test", "testing", "eval", "evaluation"),
}
IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


class _Info(TypedDict, total=False):
    features: dict[str, Any]


class Metadata(TypedDict, total=False):
    """What the `huggingface` metadata holds as far as it is read here (other keys: theirs)."""

    info: Annotated[_Info, Open()]


class _ClassLabel(TypedDict):
    names: list[str]


LISTS = ("List", "LargeList", "Sequence")  # datasets' feature types of several values
READ_FIX = (
    "write the file again with Hugging Face datasets, or drop its huggingface metadata (then "
    "the labels' own values name the classes)"
)


def features(schema: pa.Schema, source: str) -> dict[str, Any]:
    """The `huggingface` features of `schema` (column -> feature), or {} when it has none; a
    metadata that is not JSON of that shape is one ValueError naming `source` (its file): the
    class names it holds would otherwise silently become '0'..'K-1'."""
    raw = (schema.metadata or {}).get(METADATA_KEY)
    if raw is None:
        return {}
    where = f"{source}: its huggingface metadata"
    found = parse_record(raw, Annotated[Metadata, Open()], where, READ_FIX + ".")
    return found.get("info", {}).get("features", {})


def class_label_names(schema: pa.Schema, column: str, source: str) -> list[str] | None:
    """The class names of `column`'s `ClassLabel` (or of the `ClassLabel` a list of labels
    holds: List, LargeList, a fixed-length List, the older Sequence), or None when the schema
    names none; names that are no list of strings are one ValueError naming `source`."""
    feature = features(schema, source).get(column)
    if isinstance(feature, dict) and feature.get("_type") in LISTS:
        feature = feature.get("feature")
    if not isinstance(feature, dict) or feature.get("_type") != "ClassLabel":
        return None
    why = problem(feature, Annotated[_ClassLabel, Open()], f"{column} feature")
    if why is not None:
        raise ValueError(f"{source}: its huggingface metadata: {why}: {READ_FIX}.")
    return feature["names"]


def image_bytes_field(kind: pa.DataType) -> bool | None:
    """How the image column of type `kind` holds encoded bytes: True = a struct's `bytes`
    field (the `Image` feature), False = the column itself (binary); None = neither."""
    if _is_binary(kind):
        return False
    has_bytes = pa.types.is_struct(kind) and kind.get_field_index("bytes") >= 0
    return True if has_bytes and _is_binary(kind.field("bytes").type) else None


def _is_binary(kind: pa.DataType) -> bool:
    """binary in any of Arrow's layouts (a view is what some writers and readers give)."""
    t = pa.types
    return t.is_binary(kind) or t.is_large_binary(kind) or t.is_binary_view(kind)


def label_kind(kind: pa.DataType) -> str | None:
    """`int`, `str`, `int-list` or `str-list` for a label column of type `kind`; None for a
    type no label can have (floats, structs, ...)."""
    t, multi = pa.types, ""
    lists = (t.is_list, t.is_large_list, t.is_fixed_size_list, t.is_list_view, t.is_large_list_view)
    if any(is_list(kind) for is_list in lists):
        kind, multi = kind.value_type, "-list"
    if t.is_dictionary(kind):
        kind = kind.value_type
    if t.is_integer(kind):
        return f"int{multi}"
    if t.is_string(kind) or t.is_large_string(kind) or t.is_string_view(kind):
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
