"""Keys of a dataset node that the engine reads itself and never passes to the dataset kind:
k-fold cross-validation's (engine/data/folds.py). Here, below both the config checks and the
data layer, so the checks know them without importing the data layer."""

FOLD_KEYS = ("folds", "fold", "fold_seed")


def is_dataset_node(path: str) -> bool:
    """Whether config path `path` holds a dataset node: `dataset`, or a mix's source's."""
    return path == "dataset" or (path.startswith("dataset.sources.") and path.endswith(".dataset"))
