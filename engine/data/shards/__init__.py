"""WebDataset tar shards, local or remote: where they come from (sources, remote), what one
holds (members), what a set of them holds (manifest), and serving a folder of them (serve)."""


class ShardError(ValueError):
    """A shard that cannot be read (network, truncated or corrupt tar) or a member that breaks
    the sample rules; the message names the shard (and the member)."""
