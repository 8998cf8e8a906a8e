"""Parquet in the Hugging Face layout: the layout written once (layout.py), a split's files
found and their footers checked (files.py), its labels and classes (labels.py), and a split
written (writer.py). The dataset kind is engine/data/datasets/parquet.py."""
