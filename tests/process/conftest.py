"""Fixtures the child-process tests share with the in-process tests of the same topic (defined
beside those, imported here so pytest finds them by name)."""

from tests.reliability.test_run_dirs import whole  # noqa: F401
from tests.test_shard_streaming import wds_dir  # noqa: F401
