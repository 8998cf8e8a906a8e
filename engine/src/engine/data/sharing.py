"""How loader workers hand tensors to the main process (`loader.sharing_strategy`): a
process-wide torch setting, applied in one place before any worker starts."""

from __future__ import annotations

import torch.multiprocessing as torch_mp

from engine.data.loader_settings import LoaderSettings

TORCH_DEFAULT_STRATEGY = torch_mp.get_sharing_strategy()  # before anyone changed it


def apply_sharing_strategy(settings: LoaderSettings) -> str:
    """Set `loader.sharing_strategy` for this process and forked workers (null restores
    torch's default): a process-wide setting. Returns the one in force."""
    strategy = settings.sharing_strategy or TORCH_DEFAULT_STRATEGY
    available = sorted(torch_mp.get_all_sharing_strategies())
    if strategy not in available:
        raise ValueError(
            f"loader.sharing_strategy={strategy!r} is not available on this platform: "
            f"use one of {available} or null."
        )
    torch_mp.set_sharing_strategy(strategy)
    return strategy
