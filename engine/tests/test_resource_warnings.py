"""Early warnings for a small /dev/shm or open-files limit; loader.sharing_strategy applied."""

from __future__ import annotations

import logging
import resource
from collections.abc import Iterator
from dataclasses import replace

import pytest
import torch
import torch.multiprocessing as torch_mp
from hydra.utils import instantiate

from engine.config.errors import ConfigError
from engine.config.validate import validate_config
from engine.data import limits
from engine.data.datasets.base import MapDataset
from engine.data.limits import sample_size, warn_host_limits
from engine.data.sharing import TORCH_DEFAULT_STRATEGY, apply_sharing_strategy
from engine.training.assemble import assemble
from engine_dev.small_sets import loader_settings

MIB = 2**20
SETTINGS = loader_settings(32, 2, shuffle=True, drop_last=True, prefetch_factor=2)


class Images(MapDataset):
    """Four uint8 3x64x64 images (12 KiB each) with int labels."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return torch.zeros(3, 64, 64, dtype=torch.uint8), 0


class Untouchable(MapDataset):
    def __getitem__(self, index: int):
        raise AssertionError("read a sample without workers")


@pytest.fixture(autouse=True)
def torch_default_strategy() -> Iterator[None]:
    yield
    torch_mp.set_sharing_strategy(TORCH_DEFAULT_STRATEGY)


@pytest.fixture
def open_files(monkeypatch) -> Iterator[None]:
    monkeypatch.setattr(resource, "getrlimit", lambda which: (64, 4096))  # `ulimit -n` = 64
    yield


def test_sample_size_counts_bytes_and_tensors() -> None:
    assert sample_size((torch.zeros(3, 4, 4, dtype=torch.uint8), 1)) == (48 + 8, 2)
    assert sample_size({"x": torch.zeros(2, dtype=torch.float32), "ids": [1, 2]}) == (24, 3)


def test_small_shm_warns_with_estimate_and_fixes(monkeypatch, caplog) -> None:
    monkeypatch.setattr(limits, "shm_free_bytes", lambda: 1 * MIB)
    with caplog.at_level(logging.WARNING, logger="engine.data.limits"):
        warn_host_limits(SETTINGS, Images())
    # 2 workers x 2 batches x 32 x (12288 + 8) bytes x 2 headroom = 3.0 MiB
    assert "/dev/shm has 1 MiB free, but 2 workers x prefetch 2 x 0.4 MiB batches" in caplog.text
    assert "need about 3 MiB" in caplog.text and "--shm-size" in caplog.text
    assert "loader.num_workers" in caplog.text and "loader.prefetch_factor" in caplog.text


def test_enough_shm_and_files_stay_quiet(monkeypatch, caplog) -> None:
    monkeypatch.setattr(limits, "shm_free_bytes", lambda: 64 * 2**30)
    monkeypatch.setattr(resource, "getrlimit", lambda which: (65536, 65536))
    with caplog.at_level(logging.WARNING, logger="engine.data.limits"):
        warn_host_limits(SETTINGS, Images())
    assert caplog.text == ""


def test_low_open_files_limit_warns(open_files, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="engine.data.limits"):
        warn_host_limits(SETTINGS, Images())
    assert "open-files limit (ulimit -n) is 64" in caplog.text
    assert "ulimit -n 65536" in caplog.text and "loader.sharing_strategy=file_system" in caplog.text


def test_file_system_strategy_is_applied_and_needs_no_fds(open_files, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="engine.data.limits"):
        file_system = replace(SETTINGS, sharing_strategy="file_system")
        apply_sharing_strategy(file_system)
        warn_host_limits(file_system, Images())
    assert torch_mp.get_sharing_strategy() == "file_system"
    assert "ulimit" not in caplog.text
    apply_sharing_strategy(SETTINGS)  # null: back to torch's default
    assert torch_mp.get_sharing_strategy() == TORCH_DEFAULT_STRATEGY


def test_no_workers_no_checks(open_files, monkeypatch, caplog) -> None:
    monkeypatch.setattr(limits, "shm_free_bytes", lambda: 0)
    with caplog.at_level(logging.WARNING, logger="engine.data.limits"):
        warn_host_limits(replace(SETTINGS, num_workers=0), Untouchable())
    assert caplog.text == ""


def test_bad_strategy_is_a_config_error(reference_cfg) -> None:
    with pytest.raises(ConfigError, match=r"^loader\.sharing_strategy='shm': expected one of"):
        validate_config(reference_cfg("run", "loader.sharing_strategy=shm"))
    strategy = instantiate(reference_cfg("run", "loader.sharing_strategy=file_system").loader)
    assert strategy.sharing_strategy == "file_system"


def test_assemble_warns_before_the_loaders_exist(reference_cfg, monkeypatch, caplog) -> None:
    monkeypatch.setattr(limits, "shm_free_bytes", lambda: 1024)
    cfg = reference_cfg("run", "loader.num_workers=1")
    with caplog.at_level(logging.INFO):
        assemble(cfg)
    messages = [r.getMessage() for r in caplog.records]
    warned = next(i for i, m in enumerate(messages) if m.startswith("/dev/shm has 0 MiB free"))
    header = next(i for i, m in enumerate(messages) if m.startswith("device "))
    assert caplog.records[warned].levelno == logging.WARNING and warned < header
