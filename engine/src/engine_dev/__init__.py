"""What a project needs besides a run: the demo data (`make data`), the fixtures and hostile
inputs of its tests, a loopback HTTP server of tar shards. Shipped in the engine's wheel,
never imported by the engine itself (`make lint` checks it)."""
