"""The train step's own state (its state_dict(): here an EMA of the weights, added to
src/step.py as a user would) is in every checkpoint: a run killed with SIGKILL mid-epoch and
resumed ends with exactly the uninterrupted run's EMA."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import torch

from engine.runs.checkpoint_files import load_checkpoint

ROOT = Path(__file__).resolve().parents[2]
EMA_STEP = """

# ---- added by the user: an EMA of the weights, checkpointed with the step -----------------
import os
import signal

from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

_PlainStep = TrainStep


class TrainStep(_PlainStep):  # noqa: F811 (the plain step, extended)
    def __init__(self, model, *args, **kwargs):
        super().__init__(model, *args, **kwargs)
        self.ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9))

    def optimizer_step(self):
        super().optimizer_step()
        self.ema.update_parameters(self.model)
        if self.steps == int(os.environ.get("KILL_AT_STEP", "0")):
            os.kill(os.getpid(), signal.SIGKILL)  # kill -9: no handler, no last save

    def state_dict(self):
        return {"ema": self.ema.state_dict()}

    def load_state_dict(self, state):
        self.ema.load_state_dict(state["ema"])
"""


def _project(into: Path) -> Path:
    """train.py, conf/ and src/ of this template, the step with an EMA."""
    for name in ("conf", "src"):
        shutil.copytree(ROOT / name, into / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "train.py", into / "train.py")
    with (into / "src" / "step.py").open("a") as step:
        step.write(EMA_STEP)
    return into


def test_an_ema_in_the_step_resumes_exactly_after_kill_9(demo_dir: Path, tmp_path: Path) -> None:
    project = _project(tmp_path / "proj")
    # 48 train images / batch 16: 3 steps an epoch; a checkpoint every 2 steps (at 2 and 4)
    args = [f"paths.demo_dir={demo_dir}", "trainer.max_epochs=2", "loader.num_workers=0"]
    args += ["loader.batch_size=16", "model.widths=[8,16,32]", "trainer.checkpoint.every_n_steps=2"]

    def train(run: str, *more: str, kill: int = 0) -> subprocess.CompletedProcess:
        """A run in tmp_path/`run`, as a requeued job: the same fixed run dir each time."""
        command = [sys.executable, str(project / "train.py"), *args, *more]
        command += [f"paths.log_dir={tmp_path}", f"hydra.run.dir={tmp_path / run}"]
        env = os.environ | {"KILL_AT_STEP": str(kill)}
        return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)

    whole = train("whole")
    assert whole.returncode == 0, whole.stderr[-3000:]
    killed = train("killed", kill=5)  # epoch 2, after its second step: step 4's save is last
    assert killed.returncode == -signal.SIGKILL
    saved = load_checkpoint(tmp_path / "killed" / "checkpoints" / "last.pt")
    assert saved["step"] == 4 and "ema" in saved["train_step"]
    resumed = train("killed", "trainer.resume=auto")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resum" in resumed.stdout + resumed.stderr

    last = [tmp_path / run / "checkpoints" / "last.pt" for run in ("whole", "killed")]
    ema_a, ema_b = (load_checkpoint(path)["train_step"]["ema"] for path in last)
    assert ema_a.keys() == ema_b.keys() and int(ema_a["n_averaged"]) == 6
    assert all(torch.equal(ema_a[name], ema_b[name]) for name in ema_a), "EMA weights differ"
