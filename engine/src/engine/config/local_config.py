"""This machine's config file, `conf/local/default.yaml` (git-ignored; conf/config.yaml loads it
when it exists), checked before Hydra composes: a YAML error is named with the file, line and
column (Hydra's own message names neither the file nor the group), and a key under `paths`
spelt like one of conf/config.yaml's `paths` keys but not quite (`paths.dta_dir`) is refused:
Hydra would add it beside `paths.data_dir` without a word, and the run would train on the
template's default data."""

from __future__ import annotations

from pathlib import Path

import yaml

from engine.config.errors import ConfigError
from engine.core.text import closest, shown

LOCAL = Path("local") / "default.yaml"


def _read(path: Path) -> object:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(
            f"{shown(path)}{where}: not valid YAML ({problem}); fix it, or delete the file "
            "(it holds this machine's settings: conf/local/example.yaml shows the form)."
        ) from None
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"{shown(path)}: not UTF-8 text ({err.reason}); save it as UTF-8."
        ) from None


def check_local_config(conf_dir: Path) -> None:
    """Refuse `conf_dir`/local/default.yaml when it is not valid YAML, or when a key under its
    `paths` is a near-miss of a key of conf/config.yaml's `paths` (a key of your own that is
    no near-miss is kept: the file may add paths)."""
    path = conf_dir / LOCAL
    if not path.is_file():
        return
    local = _read(path)
    paths = local.get("paths") if isinstance(local, dict) else None
    main = conf_dir / "config.yaml"
    known_paths = _read(main).get("paths") if main.is_file() else None  # type: ignore[union-attr]
    if not isinstance(paths, dict) or not isinstance(known_paths, dict):
        return
    known = [str(key) for key in known_paths]
    for key in map(str, paths):
        meant = None if key in known else closest(key, known)
        if meant is not None:
            raise ConfigError(
                f"{shown(path)}: paths.{key} is not a key of paths (did you mean "
                f"paths.{meant}?): Hydra would add it beside paths.{meant}, and the run would "
                f"use paths.{meant}'s default. Fix the key's name."
            )
