"""The misbehaving dataset of the template's sweep tests (tests/train_process.py's
FAULTY names it here, a module the copied suite does not import): the engine's own,
engine_dev.faulty.FaultyImageFolder (hang, die or slow inside loader workers)."""

from engine_dev.faulty import FaultyImageFolder

__all__ = ["FaultyImageFolder"]
