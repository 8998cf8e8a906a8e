"""A launch's error is one line on stderr, and it keeps the hint Hydra prints after every
error it reports: HYDRA_FULL_ERROR=1 gives the complete stack trace."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

from engine.config.command_line import FULL_ERROR, errors_said_once
from engine.config.errors import ConfigError
from tests.conftest import REFERENCE

HINT = "(set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace)"


def _misspelt_key() -> None:
    with initialize_config_dir(config_dir=str(REFERENCE / "conf"), version_base="1.3"):
        compose(config_name="config", overrides=["loader.num_worker=4"])


def _config_error() -> None:
    raise ConfigError("loader.batch_size=0: expected int >= 1.")


def _run_error() -> None:
    raise ValueError("dataset.root=/nowhere: no such folder")


@pytest.mark.parametrize(
    ("fail", "said"),
    [
        (_misspelt_key, "loader.num_worker=4: the config has no key loader.num_worker (did you"),
        (_config_error, "loader.batch_size=0: expected int >= 1."),
        (_run_error, "ValueError: dataset.root=/nowhere: no such folder"),
    ],
)
def test_an_error_is_one_line_ending_in_hydras_hint(fail, said, capsys, monkeypatch) -> None:
    monkeypatch.delenv(FULL_ERROR, raising=False)
    with pytest.raises(SystemExit) as ended, errors_said_once(["loader.num_worker=4"]):
        fail()
    assert ended.value.code == 1
    line = capsys.readouterr().err
    assert line.startswith(said) and line.endswith(f" {HINT}\n") and line.count("\n") == 1
