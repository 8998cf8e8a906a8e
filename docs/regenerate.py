"""`make docs-outputs`: rerun the commands whose output README.md, docs/*.md and the engine's
manual (engine/src/engine/docs/*.md) show, and write that output into them, so every line shown
is today's.

A shown output is a fenced block right after a marker line naming an entry of OUTPUTS:

    <!-- output: debug-fast -->
    ```text
    ...
    ```

Each entry runs its command from the repository root (its run dir lands in outputs/, as a
reader's would), keeps the lines its pattern matches, drops log timestamps and scratch paths,
and replaces the block. `make docs-outputs NAMES="debug-fast sweep"` reruns some; a failing
command stops the script with its output. The docs test (tests/test_docs.py) checks that
every marker names an entry and every entry is shown.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANUAL = ROOT / "engine" / "src" / "engine" / "docs"  # the engine's manual, shipped in its wheel
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(MANUAL.glob("*.md"))]
PYTHON = f"{ROOT}/.venv/bin/python"
TIMESTAMP = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\]")
BROKEN_TREE = (
    f"{PYTHON} -c \"import shutil, pathlib; root = pathlib.Path('{{tmp}}/broken'); "
    "shutil.copytree('data/demo/imagefolder', root); t = root / 'train'; "
    "f = sorted((t / 'circle').glob('*.jpg'))[1]; f.write_bytes(f.read_bytes()[:300]); "
    "sorted((t / 'cross').glob('*.jpg'))[0].write_bytes(b''); "
    "(t / 'square' / 'notes.jpg').write_text('not an image')\""
)


@dataclass(frozen=True)
class Output:
    """How one shown output is made: `shown` is the command as the reader types it, `run` the
    command executed (`{py}` and `{tmp}`, a scratch folder, filled in), `keep` a pattern for
    the lines kept, `setup` a command run first."""

    shown: str
    run: str
    keep: str
    setup: str | None = None
    teardown: str | None = None  # run after the command, whatever happened
    artifact: tuple[str, str] | None = None  # (glob under outputs/runs, file in the repo) to copy
    prompt: bool = True  # print "$ <shown>" above the lines


TRAIN = "{py} train.py"  # run dirs land in outputs/, as the reader's do
NEWEST_TRAINING = "$(dirname $(ls -td outputs/runs/*/*/checkpoints | head -1))"  # make-train's
SERVE = "{py} -m engine.data.shards.serve data/shards --port 8000 > /dev/null 2>&1 & sleep 3"
STOP_SERVING = "pkill -f 'engine.data.shards.serve data/shards --port 8000'"
STREAM = (
    "python train.py dataset=iterable "
    "'dataset.train_shards=\"http://127.0.0.1:8000/train-{{000000..000007}}.tar\"' "
    "'dataset.val_shards=\"http://127.0.0.1:8000/val-{{000000..000001}}.tar\"' "
    "loader.num_workers=2 trainer.max_epochs=3"
)
STREAM_KEEP = (
    r"\[engine\.training\.assemble\]|epoch \d/3 |\[engine\.runs\.outputs\].*metrics:"
    r"|resumed from|stopped at|received"
)
OUTPUTS = {
    "timings": Output(
        "fresh clone: make setup, make train, make test",
        "{py} docs/measure_times.py",
        r"^\|",
        prompt=False,
    ),
    "make-train": Output(
        "make train",
        TRAIN,
        r"\[engine\.training\.assemble\]|epoch 12/12|\[engine\.runs\.outputs\].*metrics:"
        r"|run dir:",
    ),
    "new-project": Output(
        "make new-project DEST=../my-project && cd ../my-project && git init",
        "{py} -m tools.new_project {tmp}/my-project",
        r".",
    ),
    "eval-demo": Output(
        "python train.py mode=eval eval.checkpoint=outputs/runs/2026-11-30/16-05-12_a1b2c3",
        f"{TRAIN} mode=eval eval.checkpoint={NEWEST_TRAINING}",
        r"\[engine\.runs\.outputs\].*metrics:|\[engine\.modes\.evaluation\]",
        artifact=("*/*/confusion.png", "engine/src/engine/docs/images/confusion.png"),
    ),
    "config-tree": Output(
        "python train.py experiment=shapes_tensor debug=fast",
        f"{TRAIN} experiment=shapes_tensor debug=fast",
        r"\[engine\.config\.choices\]|^[├└]|\[engine\.training\.assemble\]",
    ),
    "config-error": Output(
        "python train.py +loader.batchsize=3 optimizer.lr=fast",
        f"{TRAIN} +loader.batchsize=3 optimizer.lr=fast",
        r"run failed|^(loader\.|optimizer\.)",
    ),
    "loader-notes": Output(
        "python train.py debug=fast loader.prefetch_factor=4",
        f"{TRAIN} debug=fast loader.prefetch_factor=4",
        r"\[engine\.data\.resolve_loader\]",
    ),
    "debug-fast": Output("python train.py debug=fast", f"{TRAIN} debug=fast", r"epoch 1/1 "),
    "debug-overfit": Output(
        "python train.py debug=overfit", f"{TRAIN} debug=overfit", r"epoch (1|20|40)/40 "
    ),
    "sequence-demo": Output(
        "python train.py experiment=sequence_demo",
        f"{TRAIN} experiment=sequence_demo",
        r"\[engine\.training\.assemble\]|epoch 8/8",
    ),
    "cifar10-missing": Output(
        "python train.py dataset=cifar10", f"{TRAIN} dataset=cifar10", r"run failed: "
    ),
    "inspect": Output(
        "python train.py mode=inspect",
        f"{TRAIN} mode=inspect",
        r"\[engine\.modes\.inspect\]\[INFO\]|^\s+(labels|loader|grid):",
    ),
    "inspect-warnings": Output(
        "python train.py mode=inspect dataset=tensor transforms=none sampler=sequential "
        "loader.shuffle=false",
        f"{TRAIN} mode=inspect dataset=tensor transforms=none sampler=sequential "
        "loader.shuffle=false",
        r"\[WARNING\] - inspect:",
    ),
    "validate": Output(
        "python train.py mode=validate dataset.root=broken",
        f"{TRAIN} mode=validate dataset.root={{tmp}}/broken",
        r"\[engine\.data\.bad_samples\]|\[engine\.modes\.validate\]",
        setup=BROKEN_TREE,
    ),
    "starvation": Output(
        "python train.py model=mlp loader.num_workers=0 trainer.max_epochs=2",
        f"{TRAIN} model=mlp loader.num_workers=0 trainer.max_epochs=2",
        r"epoch 2/2 |limits it",
    ),
    "slow-stage": Output(
        "python train.py model=mlp loader.num_workers=0 trainer.max_epochs=2",
        f"{TRAIN} model=mlp loader.num_workers=0 trainer.max_epochs=2",
        r"epoch 2/2 ",
    ),
    "sweep": Output("make sweep", f"{TRAIN} +sweep=loader", r"Sweep summary|^\|"),
    "shards-write": Output(
        "python train.py mode=shards shards.max_samples=256 shards.overwrite=true",
        f"{TRAIN} mode=shards shards.max_samples=256 shards.overwrite=true",
        r"\[engine\.modes\.shards\]",
    ),
    "stream-train": Output(
        STREAM.format(), STREAM.replace("python", "{py}", 1), STREAM_KEEP, SERVE, STOP_SERVING
    ),
    "stream-stop": Output(
        STREAM.format(),
        "timeout -s INT 25 " + STREAM.replace("python", "{py}", 1),
        STREAM_KEEP,
        SERVE,
        STOP_SERVING,
    ),
    "stream-resume": Output(
        STREAM.format() + " trainer.resume=auto",
        STREAM.replace("python", "{py}", 1) + " trainer.resume=auto",
        STREAM_KEEP,
        SERVE,
        STOP_SERVING,
    ),
    "elastic-resume": Output(
        "python docs/elastic_resume.py",
        "{py} docs/elastic_resume.py",
        r"^uninterrupted|^killed|resumed from|^steps with|^epochs using|^final val/loss|^device",
    ),
    "multilabel": Output(
        "python docs/multilabel_demo.py",
        "{py} docs/multilabel_demo.py",
        r"^device|^epoch|^best",
    ),
    "targets": Output(
        "python docs/regenerate.py --targets",
        "{py} docs/regenerate.py --targets",
        r".",
        prompt=False,
    ),
    "kfold": Output("python docs/kfold_demo.py", "{py} docs/kfold_demo.py", r"^fold \d|^\|"),
    "finetune": Output(
        "python docs/finetune_demo.py", "{py} docs/finetune_demo.py", r"^pretrained on|^\|"
    ),
    "torchrun": Output(
        "torchrun --standalone --nproc_per_node=2 train.py trainer.max_epochs=2",
        "{py} -m torch.distributed.run --standalone --nproc_per_node=2 train.py "
        "trainer.max_epochs=2",
        r"\[engine\.data\.resolve_loader\]|\[engine\.training\.assemble\]|epoch \d/2 ",
    ),
}


TARGET = re.compile(r"^\s*(?:_target_|\(\)): (engine\.[\w.]+)", re.M)  # and logging's `()`


def target_table() -> str:
    """engine/docs/engine.md's table of the engine's classes and functions a config names, each with
    the options that name it (`group=a|b`; the engine's own engine.yaml by its name): conf/'s
    and the engine's own groups (pkg://engine.conf, the installed engine's)."""
    from importlib import resources

    named: dict[str, dict[str, list[str]]] = {}  # target -> group -> options
    for conf in (ROOT / "conf", Path(str(resources.files("engine.conf")))):
        for path in sorted(conf.rglob("*.yaml")):
            group = path.parent.relative_to(conf).as_posix()
            for target in TARGET.findall(path.read_text()):
                options = named.setdefault(target, {}).setdefault(group, [])
                options += [path.stem] if group != "." else []
    width = max(map(len, named)) + 2
    return "\n".join(
        f"{target:<{width}}"
        + ", ".join(f"{g}={'|'.join(o)}" if o else "engine.yaml" for g, o in named[target].items())
        for target in sorted(named)
    )


def produce(name: str, output: Output, tmp: Path) -> str:
    """Run `output`'s command; the kept lines, without timestamps and scratch paths."""
    fill = {"py": PYTHON, "tmp": str(tmp)}
    if output.setup:
        subprocess.run(output.setup.format(**fill), shell=True, cwd=ROOT, check=True)
    try:
        done = subprocess.run(
            output.run.format(**fill), shell=True, cwd=ROOT, capture_output=True, text=True
        )
    finally:
        if output.teardown:
            subprocess.run(output.teardown, shell=True, cwd=ROOT, check=False)
    text = done.stdout + done.stderr
    if output.artifact:
        found = sorted((ROOT / "outputs" / "runs").glob(output.artifact[0]), key=_mtime)
        shutil.copyfile(found[-1], ROOT / output.artifact[1])
    if done.returncode != 0 and name not in ("config-error", "cifar10-missing", "stream-stop"):
        raise SystemExit(f"docs output {name!r}: {output.run} failed:\n{text[-3000:]}")
    lines = [TIMESTAMP.sub("", line) for line in text.splitlines()]
    kept = [line for line in lines if re.search(output.keep, line)]
    if not kept:
        raise SystemExit(f"docs output {name!r}: no line matched {output.keep!r}:\n{text[-3000:]}")
    body = "\n".join(kept).replace(f"{tmp}/my-project", "../my-project")
    body = body.replace(f"{tmp}/", "").replace(f"{ROOT}/", "")
    return (f"$ {output.shown}\n" if output.prompt else "") + body


def _mtime(path: Path) -> float:
    return path.stat().st_mtime


def rewrite(page: Path, outputs: dict[str, str]) -> bool:
    """Replace the blocks of `page` whose markers name an entry of `outputs`."""
    text = page.read_text()

    def block(match: re.Match) -> str:
        name = match.group(1)
        if name not in outputs:
            return match.group(0)
        return f"<!-- output: {name} -->\n```text\n{outputs[name]}\n```"

    new = re.sub(r"<!-- output: ([\w-]+) -->\n```text\n.*?```", block, text, flags=re.S)
    if new != text:
        page.write_text(new)
    return new != text


def main(names: list[str]) -> None:
    unknown = [n for n in names if n not in OUTPUTS]
    if unknown:
        raise SystemExit(f"unknown docs outputs {unknown}; known: {sorted(OUTPUTS)}")
    outputs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names or list(OUTPUTS):
            print(f"docs output {name} ...", file=sys.stderr, flush=True)
            outputs[name] = produce(name, OUTPUTS[name], Path(tmp))
    changed = [page.name for page in PAGES if rewrite(page, outputs)]
    print(f"rewrote {len(outputs)} outputs in {changed or 'no page (unchanged)'}")


if __name__ == "__main__":
    print(target_table()) if sys.argv[1:] == ["--targets"] else main(sys.argv[1:])
