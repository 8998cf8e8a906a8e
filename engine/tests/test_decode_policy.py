"""`dataset.decode` (engine/data/decode_policy.py): one checked node handed to every dataset
kind; engine 2.x's six keys of the dataset node keep working for a major version, from the
command line, a project's own YAML and a checkpoint's saved config, each with one warning."""

from __future__ import annotations

import logging

import pytest
from omegaconf import OmegaConf

from engine.data.datasets.imagefolder import ImageFolderDataset
from engine.data.decode_policy import TARGET, DecodePolicy, move_old_keys, moved_overrides
from engine.inference.checkpoint import run_config
from engine_dev.cli import run_script
from tests.conftest import TRAIN, reference_args


def test_old_overrides_are_spelled_as_the_new_keys_in_one_warning() -> None:
    given = [
        "dataset.on_error=skip",
        "+dataset.max_jpeg_scans=10",
        "dataset.sources.a.dataset.decode_device=main",
        "dataset.reduced_decode=false,true",
        "dataset.decode.on_error=raise",
        "loader.num_workers=2",
        "model.on_error=x",
    ]
    args, said = moved_overrides(given)
    assert args == [
        "dataset.decode.on_error=skip",
        "+dataset.decode.max_jpeg_scans=10",
        "dataset.sources.a.dataset.decode.device=main",
        "dataset.decode.reduced=false,true",
        "dataset.decode.on_error=raise",
        "loader.num_workers=2",
        "model.on_error=x",
    ]
    assert said == (
        "dataset.on_error, dataset.max_jpeg_scans, dataset.sources.a.dataset.decode_device, "
        "dataset.reduced_decode moved in engine 3.0.0 into the dataset's decode node (read as "
        "such, for one major version): write dataset.decode.on_error, "
        "dataset.decode.max_jpeg_scans, dataset.sources.a.dataset.decode.device, "
        "dataset.decode.reduced in your command line"
    )
    assert moved_overrides(["dataset.decode.device=main"]) == (["dataset.decode.device=main"], None)


def test_a_projects_own_yaml_with_the_old_keys_is_moved_into_the_node(caplog) -> None:
    """A copy whose conf/dataset/*.yaml predates the node (no decode: node at all), and a mix
    source: the old values land in decode, made where missing; an old key beside the node
    wins, as only the user can have written it."""
    dataset = OmegaConf.create(
        {
            "_target_": "engine.data.datasets.mix.MixDataset",
            "sources": {
                "a": {"dataset": {"_target_": "x.A", "on_error": "skip", "decode_device": "main"}},
                "b": {"dataset": {"_target_": "x.B", "decode": {"_target_": TARGET}}},
            },
        }
    )
    OmegaConf.set_struct(dataset, True)
    old = {
        "_target_": "x.C",
        "reduced_decode": False,
        "decode": {"_target_": TARGET, "reduced": True},
    }
    with caplog.at_level(logging.WARNING):
        move_old_keys(dataset, "your config")
        move_old_keys(old, "a checkpoint")
    assert OmegaConf.to_container(dataset.sources.a.dataset) == {
        "_target_": "x.A",
        "decode": {"_target_": TARGET, "on_error": "skip", "device": "main"},
    }
    assert old == {"_target_": "x.C", "decode": {"_target_": TARGET, "reduced": False}}
    assert len(caplog.records) == 2


def test_a_saved_config_of_engine_2_is_mapped_on_read(reference_cfg) -> None:
    """A checkpoint written by engine 2.x holds dataset.on_error and friends: eval reads them
    as dataset.decode's (its limits, as ever, are this run's)."""
    saved = OmegaConf.to_container(reference_cfg("t"), resolve=True)
    decode = saved["dataset"].pop("decode")  # type: ignore[index]
    saved["dataset"] |= {"on_error": "skip", "reduced_decode": False, "max_jpeg_scans": None}  # type: ignore[index]
    saved["data"] = {"classes": ["a", "b"]}  # type: ignore[index]
    merged = run_config(reference_cfg("e", "mode=eval"), saved, ["mode=eval"], "old.pt")  # type: ignore[arg-type]
    assert merged.dataset.decode.on_error == "skip" and merged.dataset.decode.reduced is False
    assert merged.dataset.decode.max_jpeg_scans == decode["max_jpeg_scans"]
    assert "on_error" not in merged.dataset


def test_old_keys_on_the_command_line_still_train(demo_dir, tmp_path) -> None:
    args = reference_args(
        demo_dir, tmp_path, "mode=validate", "dataset.on_error=skip", "dataset.reduced_decode=false"
    )
    validated = run_script(TRAIN, *args, cwd=tmp_path)
    assert validated.returncode == 0, validated.stderr[-2000:]
    assert validated.stdout.count("moved in engine 3.0.0") == 1  # warnings print on stdout
    (resolved,) = tmp_path.glob("runs/*/*/config_resolved.yaml")
    saved = OmegaConf.load(resolved).dataset.decode
    assert (saved.on_error, saved.reduced) == ("skip", False)


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"on_error": "ignore"}, "dataset.decode.on_error='ignore': expected one of"),
        ({"max_bad_fraction": 2.0}, "dataset.decode.max_bad_fraction=2.0: expected a number"),
        ({"device": "gpu"}, "dataset.decode.device='gpu': expected one of"),
    ],
)
def test_a_bad_policy_names_its_key(kwargs, said) -> None:
    with pytest.raises(ValueError, match=said.replace(".", r"\.")):
        DecodePolicy(**kwargs)


def test_a_kind_decoding_in_its_workers_refuses_another_device(demo_dir) -> None:
    with pytest.raises(ValueError, match=r"dataset=iterable decodes its images in the loader"):
        DecodePolicy(device="main").only_in_workers("iterable")
    folder = ImageFolderDataset(str(demo_dir / "imagefolder"), "val", decode=DecodePolicy("skip"))
    assert (folder.on_error, folder.decode_device) == ("skip", "cpu")
