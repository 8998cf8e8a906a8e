"""The demo set fixture (engine.testing), for the engine's own tests."""

pytest_plugins = ("engine.testing",)
