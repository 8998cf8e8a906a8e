"""The config groups `python train.py --help` lists (`${config_groups:app}` and
`${config_groups:hydra}` in hydra.help.template, pkg://engine.conf/engine.yaml).

Hydra's own `$APP_CONFIG_GROUPS` lists the groups of the primary config folder (conf/) only:
its help reads the search path without the primary config's `hydra.searchpath`, so the
engine's groups (pkg://engine.conf: eval, predict, logger, hydra/launcher, ...) were missing.
Here every source the composition used (hydra.runtime.config_sources: conf/, --config-dir,
each hydra.searchpath entry, Hydra's own) is listed through Hydra's ConfigSource plugins."""

from __future__ import annotations

from collections.abc import Sequence

from hydra.core.object_type import ObjectType
from hydra.core.plugins import Plugins
from hydra.plugins.config_source import ConfigSource
from omegaconf import DictConfig

HYDRA = "hydra"  # the top group of Hydra's own parts (hydra/launcher, hydra/job_logging, ...)
KINDS = ("app", "hydra")  # what ${config_groups:KIND} lists: the app's groups, or Hydra's


def _sources(composed: DictConfig) -> list[ConfigSource]:
    """The config sources `composed` (a composed config's `hydra` node) was read from."""
    kinds = {source.scheme(): source for source in Plugins.instance().discover(ConfigSource)}
    return [
        kinds[info.schema](info.provider, f"{info.schema}://{info.path}")
        for info in composed.runtime.config_sources
    ]


def _options(sources: Sequence[ConfigSource], group: str, what: ObjectType) -> list[str]:
    """The configs (`what` CONFIG) or the groups (GROUP) in `group` of any of `sources`, sorted."""
    return sorted(
        {name for source in sources if source.is_group(group) for name in source.list(group, what)}
    )


def _groups(sources: Sequence[ConfigSource], parent: str) -> list[str]:
    """Every group under `parent` that holds a config (a group of groups alone is no choice),
    nested ones as parent/child."""
    found: list[str] = []
    for child in _options(sources, parent, ObjectType.GROUP):
        group = f"{parent}/{child}" if parent else child
        found += [group] if _options(sources, group, ObjectType.CONFIG) else []
        found += _groups(sources, group)
    return found


def config_groups(kind: str, *, _root_: DictConfig) -> str:
    """One line per group of the whole search path, `group: option, option`, sorted: the app's
    (`kind` app) or Hydra's (`kind` hydra), of `_root_`, the composed config with its `hydra`
    node. `$` is doubled: the help page is a string.Template."""
    if kind not in KINDS:
        raise ValueError(
            f"hydra.help.template: ${{config_groups:{kind}}} names no kind of groups: write "
            "${config_groups:app} (the app's) or ${config_groups:hydra} (Hydra's)."
        )
    sources = _sources(_root_[HYDRA])
    if kind == HYDRA:
        groups = _groups(sources, HYDRA)
    else:
        groups = [group for group in _groups(sources, "") if group.split("/")[0] != HYDRA]
    lines = [f"{g}: {', '.join(_options(sources, g, ObjectType.CONFIG))}" for g in sorted(groups)]
    return "\n".join(lines).replace("$", "$$") + "\n"
