"""Pretrained weights from a hub, as the libraries download them (with their progress bars),
or one line within seconds where they cannot be had.

torchvision's weights come from download.pytorch.org into $TORCH_HOME/hub/checkpoints,
timm's from the Hugging Face Hub into $HF_HUB_CACHE. Whatever is in those caches loads
without a network. What is not, on a machine that cannot reach the hub (a cluster's compute
node, an air-gapped box), would otherwise wait on a connection: urllib, under
torch.hub, has no timeout at all. So before a download the hub is asked once, with a short
timeout (HEAD, through the same proxies the download would use); where that fails, a
`WeightsError` names the config key, the cache folder looked in and the two fixes.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import huggingface_hub
import torch
from huggingface_hub import constants as hf

from engine.models.weights import WeightsError

PROBE_TIMEOUT_S = 5.0  # seconds to wait for the hub's first answer before calling it unreachable


def unreachable(url: str) -> str | None:
    """Why `url` cannot be fetched now (None: it answers): a HEAD request with a short
    timeout, through the environment's proxies as urllib's download would go."""
    request = urllib.request.Request(url, method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S):
            return None
    except urllib.error.HTTPError as err:  # an answer: the hub is there (a redirect, 403, ...)
        return None if err.code < 500 else f"it answered HTTP {err.code}"
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        return f"{type(reason).__name__}: {reason}"


def offline_error(key: str, what: str, cached: Path, why: str) -> WeightsError:
    """The one line for hub weights that are neither in `cached` nor downloadable (`why`)."""
    return WeightsError(
        f"{key}: {what} are not in the cache ({cached}) and cannot be downloaded ({why}). "
        f"Copy that cache from a machine with a network (the folder {cached.parent}), or "
        "give the weights as a file: model.pretrained_file=PATH (a .pth or .safetensors)."
    )


def torchvision_file(url: str) -> Path:
    """Where torch.hub keeps the download of `url`: $TORCH_HOME/hub/checkpoints/<name>."""
    return Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(urlparse(url).path)


def torchvision_weights(weights: object, key: str, what: str) -> dict[str, torch.Tensor]:
    """The state dict of a torchvision weights enum member: from torch.hub's cache, or
    downloaded with its progress bar; a `WeightsError` within seconds where neither can be."""
    url: str = weights.url  # type: ignore[attr-defined]
    cached = torchvision_file(url)
    if not cached.is_file():
        why = unreachable(url)
        if why is not None:
            raise offline_error(key, what, cached, why)
    try:
        return weights.get_state_dict(progress=True)  # type: ignore[attr-defined]
    except (OSError, RuntimeError) as err:  # cut off mid-download, or a damaged cache file
        raise WeightsError(f"{key}: {what} could not be read from {cached} ({err}).") from err


def hf_file(repo: str, names: list[str]) -> tuple[Path | None, str]:
    """(the first of `names` in the Hugging Face cache of model repo `repo` (`id@revision`),
    else None; the URL the first name downloads from)."""
    repo_id, _, revision = repo.partition("@")
    for name in names:
        found = huggingface_hub.try_to_load_from_cache(repo_id, name, revision=revision or None)
        if isinstance(found, str):
            return Path(found), ""
    url = f"{hf.ENDPOINT}/{repo_id}/resolve/{revision or 'main'}/{names[0]}"
    return None, url


def hf_cache(repo: str) -> Path:
    """The folder the Hugging Face cache keeps model repo `repo` in."""
    return Path(hf.HF_HUB_CACHE) / f"models--{repo.partition('@')[0].replace('/', '--')}"


def hub_unreachable(url: str) -> str | None:
    """Why `url` of the Hugging Face Hub cannot be fetched now (None: it can): offline mode
    (HF_HUB_OFFLINE), or no answer to one short request."""
    if hf.is_offline_mode():
        return "HF_HUB_OFFLINE is set"
    return unreachable(url)
