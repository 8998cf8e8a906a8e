"""WebDataset tar shards, local or remote: where they come from (sources, remote), what one
holds (members), what a set of them holds (manifest), and serving a folder of them (serve)."""


class ShardError(ValueError):
    """A shard that cannot be read (network, truncated or corrupt tar) or a member that breaks
    the sample rules; the message names the shard (and the member)."""


# The fix named wherever remote shards have no manifest entry and cannot be counted.
BUILD_HINT = "python -m engine.data.shards.manifest 'PATTERN' --out shards.json"
