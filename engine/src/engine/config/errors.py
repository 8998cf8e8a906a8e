"""The one exception a bad config raises."""

from __future__ import annotations

from hydra.errors import CompactHydraException


class ConfigError(CompactHydraException):
    """A config problem, stated as `full.key=value: what was expected; the fix`.

    A CompactHydraException, so Hydra prints the message alone instead of a traceback
    (HYDRA_FULL_ERROR=1 still shows the frames).
    """
