"""The engine's config groups on the project's search path, checked before Hydra composes:
conf/config.yaml's `hydra.searchpath` must hold `pkg://engine.conf` (without it every engine
group is missing, and Hydra's errors name neither the list nor the entry), and a conf/engine.yaml
of the project's would replace the engine's whole engine.yaml (its `mode`, the modes' settings,
the callbacks), failing later with `mode=None`."""

from __future__ import annotations

from pathlib import Path

from engine.config.command_line import ENGINE_CONF
from engine.config.errors import ConfigError
from engine.config.local_config import primary_config, search_entries, searchpath_of
from engine.core.text import shown


def check_search_path(script_dir: Path, argv: list[str]) -> None:
    """Refuse, in one line naming the file and the fix, a primary config whose
    `hydra.searchpath` lacks the engine's groups, or an engine.yaml of a folder Hydra searches
    before the engine's (conf/, `--config-dir`, an earlier searchpath entry) shadowing it. A
    `hydra.searchpath=` on the command line is checked where it fails
    (engine/config/command_line.py `searchpath_lost`)."""
    entries = search_entries(script_dir, argv)
    primary = entries[0]
    assert isinstance(primary, Path)
    main_file = primary / "config.yaml"
    before = entries[: entries.index(ENGINE_CONF)] if ENGINE_CONF in entries else entries
    shadow = next(
        (e / "engine.yaml" for e in before if isinstance(e, Path) and (e / "engine.yaml").exists()),
        None,
    )
    if shadow is not None:
        raise ConfigError(
            f"{shown(shadow)}: it shadows the engine's engine.yaml "
            f"({ENGINE_CONF}), which conf/config.yaml's defaults load as `engine`, so the "
            "engine's own keys (mode, the modes' settings, run dirs, callbacks) would be lost: "
            "put your keys in conf/config.yaml (or conf/local/default.yaml), and remove or "
            "rename this file."
        )
    if any(arg.startswith("hydra.searchpath=") for arg in argv) or not main_file.is_file():
        return
    listed = searchpath_of(primary_config(primary))
    if listed is None or ENGINE_CONF not in listed:
        raise ConfigError(
            f"{shown(main_file)}: its hydra.searchpath {'lacks' if listed else 'is not set to'} "
            f"{ENGINE_CONF}, where the engine's config groups are (eval, predict, benchmark, "
            f"logger, hydra/launcher, ...): add `- {ENGINE_CONF}` first under hydra.searchpath."
        )
