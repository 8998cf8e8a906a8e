"""Side-by-side benchmarks; results and the commands that made them are in BENCHMARKS.md."""
