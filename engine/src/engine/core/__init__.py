"""The helpers every layer uses: crash-safe writes, file names in messages, CPU counts, seeds,
a launch's identity, labelled image grids, and how a failed run reports its cause."""
