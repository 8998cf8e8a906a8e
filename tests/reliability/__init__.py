"""Reliability tests: bad configs, unsafe targets, resource limits, bad data (a package, so
their file names may repeat those in tests/)."""
