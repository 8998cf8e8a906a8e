"""Your dataset kinds for the `dataset` config group, one module each: a class under the
engine's dataset contract (engine.data.datasets.base.MapDataset or StreamDataset, see the
engine manual's datasets.md). The built-in kinds (imagefolder, csv, tensor, ...) are the engine's."""
