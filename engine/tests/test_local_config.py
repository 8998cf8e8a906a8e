"""This machine's conf/local/default.yaml is checked before Hydra composes: a YAML error (a
duplicate key too) names the file, line and column; a file without its `# @package _global_`
header is refused; a near-miss of a `paths` key or of a top-level key is refused with the key
it meant; a key of the user's own is kept; a file Hydra would pass over (a broken link, a
default.yml) is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.config.errors import ConfigError
from engine.config.local_config import check_local_config

MAIN = "paths:\n  root_dir: .\n  data_dir: ${paths.root_dir}/data\n  log_dir: outputs\n"


def _conf(tmp_path: Path, local: str) -> Path:
    conf = tmp_path / "conf"
    (conf / "local").mkdir(parents=True)
    (conf / "config.yaml").write_text(MAIN)
    (conf / "local" / "default.yaml").write_text(local)
    return conf


def test_a_misspelt_path_key_is_refused_with_the_key_it_meant(tmp_path: Path) -> None:
    conf = _conf(tmp_path, "# @package _global_\npaths:\n  dta_dir: /mnt/data\n")
    with pytest.raises(ConfigError) as err:
        check_local_config(conf)
    said = str(err.value)
    assert said.startswith(f"{conf / 'local' / 'default.yaml'}: paths.dta_dir is not a key")
    assert "(did you mean paths.data_dir?)" in said and "\n" not in said


@pytest.mark.parametrize(
    ("key", "meant"), [("pathz", "paths"), ("dataste", "dataset"), ("mdoe", "mode")]
)
def test_a_misspelt_top_level_key_is_refused_with_the_key_it_meant(tmp_path, key, meant) -> None:
    (tmp_path / "conf" / "dataset").mkdir(parents=True)  # a group of the template's conf/
    conf = _conf(tmp_path, f"# @package _global_\n{key}:\n  data_dir: /mnt/data\n")
    with pytest.raises(ConfigError) as err:
        check_local_config(conf)
    said = str(err.value)
    assert said.startswith(f"{conf / 'local' / 'default.yaml'}: {key} is not a key")
    assert f"(did you mean {meant}?)" in said and "\n" not in said


def test_a_yaml_error_names_the_file_line_and_column(tmp_path: Path) -> None:
    conf = _conf(tmp_path, "paths:\n  data_dir: /mnt/data\n   log_dir: [oops\n")
    with pytest.raises(
        ConfigError, match=r"local/default\.yaml line 3, column \d+: not valid YAML"
    ):
        check_local_config(conf)


def test_right_keys_and_keys_of_ones_own_pass(tmp_path: Path) -> None:
    local = (
        "# @package _global_\npaths:\n  data_dir: /mnt/d\n  pretrained: /mnt/w\nmodel_dir: /mnt/m\n"
    )
    check_local_config(_conf(tmp_path, local))
    check_local_config(tmp_path / "nowhere")  # no local file: nothing to check


@pytest.mark.parametrize(
    ("header", "said"),
    [
        ("", "header, so Hydra"),
        ("\ufeff# @package _global_\n", "byte-order mark"),
        ("# my paths\n# @package _global_\n", "header, so Hydra"),
    ],
)
def test_a_file_without_the_global_package_header_is_refused(tmp_path, header, said) -> None:
    """Without the header (or with a BOM or a comment before it) Hydra puts the keys under
    local.: paths.data_dir would be ignored without a word."""
    conf = _conf(tmp_path, header + "paths:\n  data_dir: /mnt/d\n")
    with pytest.raises(ConfigError) as err:
        check_local_config(conf)
    message = str(err.value)
    assert message.startswith(f"{conf / 'local' / 'default.yaml'}: no `# @package _global_`")
    assert said in message and "local.paths.data_dir" in message and "\n" not in message


def test_a_duplicate_key_names_the_file_line_and_column(tmp_path: Path) -> None:
    conf = _conf(tmp_path, "# @package _global_\npaths:\n  data_dir: /a\n  data_dir: /b\n")
    with pytest.raises(
        ConfigError,
        match=r"local/default\.yaml line 4, column 3: not valid YAML \(duplicate key 'data_dir', "
        r"also on line 3\)",
    ):
        check_local_config(conf)


def test_a_local_file_hydra_would_pass_over_is_refused(tmp_path: Path) -> None:
    conf = _conf(tmp_path, "# @package _global_\npaths:\n  data_dir: /mnt/data\n")
    local = conf / "local" / "default.yaml"
    local.rename(local.with_suffix(".yml"))
    with pytest.raises(ConfigError, match=r"default\.yml: Hydra reads only \.yaml.*rename it"):
        check_local_config(conf)
    local.symlink_to(tmp_path / "gone.yaml")
    with pytest.raises(ConfigError, match=r"default\.yaml: a broken link or no regular file"):
        check_local_config(conf)


@pytest.mark.parametrize("flag", [["--config-dir", "{x}"], ["--config-dir={x}"], ["-cd", "{x}"]])
def test_the_local_file_found_through_config_dir_is_the_one_checked(tmp_path, flag) -> None:
    """Hydra composes the first local/default.yaml of its search path: --config-dir's when
    conf/ has none. It was skipped: a misspelt paths.dta_dir trained on the default data."""
    conf = _conf(tmp_path, "")
    (conf / "local" / "default.yaml").unlink()
    machine = tmp_path / "machine"
    (machine / "local").mkdir(parents=True)
    (machine / "local" / "default.yaml").write_text("# @package _global_\npaths:\n  dta_dir: /d\n")
    argv = ["mode=train", *(f.format(x=machine) for f in flag)]
    with pytest.raises(ConfigError, match=rf"^{machine / 'local' / 'default.yaml'}: paths.dta_dir"):
        check_local_config(conf, argv)
    (conf / "local" / "default.yaml").write_text("# @package _global_\npaths:\n  data_dir: /d\n")
    check_local_config(conf, argv)  # conf/'s comes first in Hydra's search path: it is the one


def test_a_project_engine_yaml_or_a_searchpath_without_the_engine_is_refused(tmp_path) -> None:
    """A conf/engine.yaml of one key replaced the engine's whole file (the run failed with
    mode=None); a searchpath without pkg://engine.conf lost every engine group, Hydra's errors
    naming neither."""
    from engine.config.search_path import check_search_path

    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "config.yaml").write_text(MAIN + "hydra:\n  searchpath:\n    - pkg://engine.conf\n")
    check_search_path(tmp_path, [])
    (conf / "engine.yaml").write_text("mode: eval\n")
    with pytest.raises(ConfigError, match=r"engine\.yaml: it shadows the engine's engine\.yaml"):
        check_search_path(tmp_path, [])
    (conf / "engine.yaml").unlink()
    (conf / "config.yaml").write_text(MAIN + "hydra:\n  searchpath:\n    - file:///elsewhere\n")
    with pytest.raises(
        ConfigError, match=r"config\.yaml: its hydra\.searchpath lacks pkg://engine"
    ):
        check_search_path(tmp_path, [])
    check_search_path(tmp_path, ["hydra.searchpath=[pkg://engine.conf]"])  # said where it fails


def test_the_fix_for_an_emptied_searchpath_is_one_hydra_takes() -> None:
    """`hydra.searchpath=[pkg://engine.conf,]` was proposed, which Hydra's grammar refuses."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import MissingConfigException

    from engine.config.command_line import searchpath_lost

    for given in ("hydra.searchpath=[]", "hydra.searchpath=[file:///x]"):
        line = searchpath_lost(MissingConfigException("missing", "eval"), [given])
        fix = line.rsplit("keep them first: ", 1)[1]
        OverridesParser.create().parse_overrides([fix])  # raises on a list it refuses


def test_a_relative_searchpath_entry_is_read_from_the_working_directory_as_hydra_reads_it(
    tmp_path, monkeypatch
) -> None:
    """Hydra reads `file://extra` from the working directory, not from conf/: the check once
    looked in conf/extra (refusing a file Hydra never composes) and passed over the one used."""
    from engine.config.local_config import config_dirs

    conf = _conf(tmp_path, "")
    (conf / "local" / "default.yaml").unlink()
    (conf / "config.yaml").write_text(
        MAIN + "hydra:\n  searchpath:\n    - pkg://engine.conf\n    - file://extra\n"
    )
    work = tmp_path / "work"
    (work / "extra" / "local").mkdir(parents=True)
    (work / "extra" / "local" / "default.yaml").write_text("foo_marker: 1\n")
    monkeypatch.chdir(work)
    assert config_dirs(tmp_path, ["-cd", "x"]) == [conf, work / "x", work / "extra"]
    with pytest.raises(
        ConfigError, match=rf"^{work / 'extra' / 'local' / 'default.yaml'}: no `# @package"
    ):
        check_local_config(conf, [])


def test_an_engine_yaml_in_config_dir_shadows_the_engines_too(tmp_path) -> None:
    from engine.config.search_path import check_search_path

    conf = _conf(tmp_path, "# @package _global_\n")
    (conf / "config.yaml").write_text(MAIN + "hydra:\n  searchpath:\n    - pkg://engine.conf\n")
    (tmp_path / "cd2").mkdir()
    (tmp_path / "cd2" / "engine.yaml").write_text("mode: train\n")
    with pytest.raises(ConfigError, match=r"cd2/engine\.yaml: it shadows the engine's"):
        check_search_path(tmp_path, ["--config-dir", str(tmp_path / "cd2")])
