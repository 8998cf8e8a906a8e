"""Pretrained weights from a hub: a file in the library's cache, or downloaded there by the
library's own downloader (with its progress bar), or one line within seconds where neither
can be; then read by the engine's reader of weights from elsewhere (engine.models.weights).

torchvision's weights come from download.pytorch.org into $TORCH_HOME/hub/checkpoints,
timm's from the Hugging Face Hub into $HF_HUB_CACHE (or, for older weights, from a URL into
torch.hub's folder). A cache is input from elsewhere too: copying one from a machine with a
network is the fix offered offline, and torch.hub's own loader unpickles with
weights_only=False, so a planted file there ran its code. So the engine never lets the
libraries load a cached file: it reads the file itself (weights_only, safetensors) and hands
timm the state dict (its `pretrained_cfg_overlay`: timm's own head replacement and first-layer
adaptation still apply).

What is not in a cache, on a machine that cannot reach the hub (a cluster's compute node, an
air-gapped box), would otherwise wait on a connection (urllib, under torch.hub, has no timeout;
timm's hub client retried for 46 s here). So before a download the hub is asked once, with a
short timeout (HEAD, through the same proxies the download would use); where that fails, a
`WeightsError` names the config key, the cache folder looked in and the two fixes.
"""

from __future__ import annotations

import os
import urllib.error
from pathlib import Path
from urllib.parse import urlparse

import huggingface_hub
import huggingface_hub.errors
import torch
from huggingface_hub import constants as hf

from engine.core.probe import no_answer
from engine.models.weights import WeightsError, read_weights

HF_NAMES = ("model.safetensors", "pytorch_model.bin")  # what timm looks for in a Hub repo, in order


def unreachable(url: str) -> str | None:
    """Why `url` cannot be fetched now (None: it answers): a HEAD request with a short
    timeout (engine/core/probe.py), through the environment's proxies as urllib's download
    would go; a server error (HTTP 500 on) counts as down."""
    return no_answer(url, method="HEAD", down_from=500, named=True)


def offline_error(key: str, what: str, cached: Path, why: str) -> WeightsError:
    """The one line for hub weights that are neither in `cached` nor downloadable (`why`)."""
    return WeightsError(
        f"{key}: {what} are not in the cache ({cached}) and cannot be downloaded ({why}). "
        f"Copy that cache from a machine with a network (the folder {cached.parent}), or "
        "give the weights as a file: model.pretrained_file=PATH (a .pth or .safetensors)."
    )


def url_file(url: str) -> Path:
    """Where torch.hub keeps the download of `url`: $TORCH_HOME/hub/checkpoints/<name>."""
    return Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(urlparse(url).path)


def from_url(url: str, key: str, what: str) -> tuple[dict[str, torch.Tensor], str]:
    """The weights at `url` (torchvision's, timm's older ones) and where they were read: from
    torch.hub's cache, or downloaded there by torch.hub with its progress bar."""
    cached = url_file(url)
    if not cached.is_file():
        why = unreachable(url)
        if why is not None:
            raise offline_error(key, what, cached, why)
        cached.parent.mkdir(parents=True, exist_ok=True)
        try:
            torch.hub.download_url_to_file(url, str(cached), progress=True)
        except (OSError, RuntimeError, urllib.error.URLError) as err:  # cut off mid-download
            raise WeightsError(
                f"{key}: {what} could not be downloaded from {url} ({err})."
            ) from err
    return _read_cached(cached, key, what)


def from_hub(repo: str, key: str, what: str) -> tuple[dict[str, torch.Tensor], str]:
    """The weights of Hugging Face Hub model repo `repo` (`id` or `id@revision`; its
    model.safetensors, else pytorch_model.bin) and where they were read: from the Hub's cache,
    or downloaded there by huggingface_hub with its progress bar."""
    repo_id, _, revision = repo.partition("@")
    for name in HF_NAMES:
        found = huggingface_hub.try_to_load_from_cache(repo_id, name, revision=revision or None)
        if isinstance(found, str):
            return _read_cached(Path(found), key, what)
    url = f"{hf.ENDPOINT}/{repo_id}/resolve/{revision or 'main'}/{HF_NAMES[0]}"
    folder = Path(hf.HF_HUB_CACHE) / f"models--{repo_id.replace('/', '--')}"
    why = "HF_HUB_OFFLINE is set" if hf.is_offline_mode() else unreachable(url)
    if why is not None:
        raise offline_error(key, what, folder, why)
    for name in HF_NAMES:
        try:
            path = huggingface_hub.hf_hub_download(repo_id, name, revision=revision or None)
        except huggingface_hub.errors.RemoteEntryNotFoundError:  # no safetensors: the .bin
            continue
        except Exception as err:  # a proxy's answer, a cut download: the client's own words
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise WeightsError(
                f"{key}: {what} could not be downloaded from {hf.ENDPOINT} "
                f"({type(err).__name__}: {first}); the cache looked in: {folder}."
            ) from err
        return _read_cached(Path(path), key, what)
    raise WeightsError(f"{key}: {hf.ENDPOINT}/{repo_id} holds none of {list(HF_NAMES)}.")


def _read_cached(path: Path, key: str, what: str) -> tuple[dict[str, torch.Tensor], str]:
    """The weights of cache file `path` (of `what`, given as config `key`), read by the engine's
    reader of weights from elsewhere, and where they were read."""
    return read_weights(path, key, f"{key}: the cached {what}, {path},").tensors, f"{what} ({path})"
