"""The engine under the template: data, loaders, checkpoints and resume, distributed runs,
sweeps, inference, config checks and measurement. A library to upgrade by replacing this
folder, never to edit; its public API is engine.api (engine/docs/engine.md, its manual, installed
with it)."""

__version__ = "3.0.0"
