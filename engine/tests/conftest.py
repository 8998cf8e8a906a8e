"""The demo set fixture (engine_dev.fixtures), for the engine's own tests."""

pytest_plugins = ("engine_dev.fixtures",)
