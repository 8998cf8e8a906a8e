"""This machine's config file, `conf/local/default.yaml` (git-ignored; conf/config.yaml loads it
when it exists), checked before Hydra composes: a YAML error is named with the file, line and
column (Hydra's own message names neither the file nor the group), a key given twice is refused
there too, a file without the `# @package _global_` header (or with a byte-order mark hiding
it) is refused (Hydra would put its keys under `local.` without a word), and a key under `paths`
spelt like one of conf/config.yaml's `paths` keys but not quite (`paths.dta_dir`) is refused:
Hydra would add it beside `paths.data_dir` without a word, and the run would train on the
template's default data. A top-level key spelt like one of the config's (`pathz`, `dataste`:
a key of conf/config.yaml or engine.yaml, or a group of conf/ or the engine's) is refused
alike."""

from __future__ import annotations

import os
import re
from pathlib import Path

import yaml
from yaml.constructor import ConstructorError

import engine.conf
from engine.config.errors import ConfigError
from engine.core.text import closest, shown

LOCAL = Path("local") / "default.yaml"


# a header line as Hydra reads it (hydra/plugins/config_source.py): the file's leading lines,
# blank or `# @key value`, up to the first other line
HEADER = re.compile(r"#\s*@(\S+)\s+(\S+)")


class _UniqueKeys(yaml.SafeLoader):
    """yaml.SafeLoader refusing a key twice in one mapping (PyYAML keeps the last without a
    word; Hydra's loader refuses it naming neither the file nor the line)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        first: dict[str, int] = {}
        for key, _ in node.value:
            if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                line = first.setdefault(key.value, key.start_mark.line + 1)
                if line != key.start_mark.line + 1:
                    raise ConstructorError(
                        problem=f"duplicate key {key.value!r}, also on line {line}",
                        problem_mark=key.start_mark,
                    )
        return super().construct_mapping(node, deep)


def _package(text: str) -> str | None:
    """The `# @package` of the header of `text`, as Hydra reads it (None: none)."""
    for line in map(str.strip, text.splitlines()):
        if not line:
            continue
        header = HEADER.fullmatch(line)
        if header is None:
            return None
        if header[1] == "package":
            return header[2]
    return None


def read_yaml(path: Path) -> object:
    try:
        return yaml.load(path.read_text(encoding="utf-8"), _UniqueKeys)  # a SafeLoader
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


def _flag(argv: list[str], names: tuple[str, ...]) -> str | None:
    """The value of the last of Hydra's flags `names` in `argv` (`-cd X`, `--config-dir=X`)."""
    found = None
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name in names:
            found = value if eq else (argv[i + 1] if i + 1 < len(argv) else None)
    return found


def primary_config(primary: Path) -> object:
    """The primary config.yaml of folder `primary` as YAML, None when it is missing or does not
    parse (Hydra then names its own error in it)."""
    try:
        return read_yaml(primary / "config.yaml") if (primary / "config.yaml").is_file() else None
    except ConfigError:
        return None


def searchpath_of(main: object) -> list[object] | None:
    """The `hydra.searchpath` list of a parsed primary config, None where it sets none."""
    hydra = main.get("hydra") if isinstance(main, dict) else None
    entries = hydra.get("searchpath") if isinstance(hydra, dict) else None
    return entries if isinstance(entries, list) else None


def search_entries(script_dir: Path, argv: list[str]) -> list[Path | str]:
    """Hydra's config search path past its own, in its order (hydra/_internal/utils.py and
    config_loader_impl.py): the primary folder (conf/, or `--config-path`), `--config-dir`
    (inserted before the structured configs), then the entries of the primary config.yaml's
    `hydra.searchpath`, appended: a `file://` entry as the folder it names (relative to the
    working directory, as Hydra reads it), any other (`pkg://engine.conf`) as written."""
    primary = script_dir / (_flag(argv, ("--config-path", "-cp")) or "conf")
    extra = _flag(argv, ("--config-dir", "-cd"))
    listed = [
        Path(str(e)[len("file://") :]).absolute() if str(e).startswith("file://") else str(e)
        for e in searchpath_of(primary_config(primary)) or []
    ]
    return [primary, *([Path(extra).absolute()] if extra else []), *listed]


def config_dirs(script_dir: Path, argv: list[str]) -> list[Path]:
    """The project's folders on Hydra's search path (`search_entries`), in its order: the
    first that holds local/default.yaml gives the file Hydra composes."""
    return [e for e in search_entries(script_dir, argv) if isinstance(e, Path)]


def check_local_config(conf_dir: Path, argv: list[str] | None = None) -> None:
    """Refuse the local/default.yaml Hydra composes (the first of `config_dirs` that holds
    one; `conf_dir`/local/default.yaml without `argv`) when it is not valid YAML (a duplicate
    key included), has keys but no `# @package _global_` header, or when a key under its
    `paths` is a near-miss of a key of conf/config.yaml's `paths` (a key of your own that is
    no near-miss is kept: the file may add paths). A file Hydra would pass over without a word
    is refused too: a default.yaml that is a broken link or no file, or only a default.yml."""
    folders = [conf_dir] if argv is None else config_dirs(conf_dir.parent, argv)
    path = next((f / LOCAL for f in folders if os.path.lexists(f / LOCAL)), conf_dir / LOCAL)
    conf_dir = folders[0]
    if not path.is_file():
        if path.is_symlink() or path.exists():
            raise ConfigError(
                f"{shown(path)}: a broken link or no regular file, so this machine's settings "
                "would be passed over: point it at the file, or remove it."
            )
        if path.with_suffix(".yml").exists():
            raise ConfigError(
                f"{shown(path.with_suffix('.yml'))}: Hydra reads only .yaml, so this machine's "
                f"settings would be passed over: rename it to {path.name}."
            )
        return
    local = read_yaml(path)
    text = path.read_text(encoding="utf-8")
    if local is not None and _package(text) is None:
        bom = " (it starts with a UTF-8 byte-order mark, which hides the header: save it without)"
        raise ConfigError(
            f"{shown(path)}: no `# @package _global_` header"
            f"{bom if text.startswith(chr(0xFEFF)) else ''}, so Hydra would put its keys under "
            "local (local.paths.data_dir) and the run would use the default paths: make "
            "`# @package _global_` its first line (Hydra reads it only before any other line), "
            "as in conf/local/example.yaml."
        )
    main = read_yaml(conf_dir / "config.yaml") if (conf_dir / "config.yaml").is_file() else None
    if isinstance(local, dict):
        _refuse_near_misses(path, list(map(str, local)), _top_level(conf_dir, main), cutoff=0.75)
    paths = local.get("paths") if isinstance(local, dict) else None
    known_paths = main.get("paths") if isinstance(main, dict) else None
    if not isinstance(paths, dict) or not isinstance(known_paths, dict):
        return
    _refuse_near_misses(
        path, [str(key) for key in paths], [str(key) for key in known_paths], "paths."
    )


def _top_level(conf_dir: Path, main: object) -> list[str]:
    """The config's top-level names: conf/config.yaml's and engine.yaml's keys, and the groups
    of conf/ and of the engine's config package."""
    engine_dir = Path(engine.conf.__file__).parent
    engine_yaml = read_yaml(engine_dir / "engine.yaml")
    names = {
        *(main if isinstance(main, dict) else {}),
        *(engine_yaml if isinstance(engine_yaml, dict) else {}),
        *(d.name for folder in (conf_dir, engine_dir) for d in folder.iterdir() if d.is_dir()),
    }
    return sorted(str(name) for name in names if not str(name).startswith(("_", "defaults")))


def _refuse_near_misses(
    path: Path, keys: list[str], known: list[str], prefix: str = "", cutoff: float = 0.6
) -> None:
    """Refuse a key of `keys` that is not in `known` but spelt like one of them (difflib's ratio
    >= `cutoff`; Hydra would add it beside the one meant without a word); a key of one's own
    that is no near-miss is kept. Top-level keys take 0.75: `mdoe` (0.75) is a typo of `mode`,
    `model_dir` (0.71) a key of one's own."""
    for key in keys:
        meant = None if key in known else closest(key, known, cutoff)
        if meant is not None:
            raise ConfigError(
                f"{shown(path)}: {prefix}{key} is not a key of the config (did you mean "
                f"{prefix}{meant}?): Hydra would add it beside {prefix}{meant}, and the run "
                f"would use {prefix}{meant}'s default. Fix the key's name."
            )
