"""What a run shows while it goes: the train/loss window between logged points, and the one
line each epoch ends with."""

from __future__ import annotations

import torch

from engine.metric_keys import is_count


class LossWindow:
    """The train losses since the last logged point, summed on the device (no sync per batch)."""

    def __init__(self, device: torch.device) -> None:
        self.total = torch.zeros((), device=device)
        self.batches = 0

    def add(self, loss: torch.Tensor) -> None:
        """Count one batch's mean loss."""
        self.total += loss.detach()
        self.batches += 1

    def take(self) -> float:
        """The mean loss since the last `take` (0 when no batch came), and start anew."""
        mean = self.total.item() / max(1, self.batches)
        self.total.zero_()
        self.batches = 0
        return mean

    def state(self) -> tuple[torch.Tensor, int]:
        """What a checkpoint keeps of it (a resumed run logs the same points)."""
        return self.total, self.batches

    def load(self, state: tuple[torch.Tensor, int]) -> None:
        """Continue from `state()`."""
        self.total.copy_(state[0])
        self.batches = state[1]


def epoch_line(epoch: int, epochs: int, metrics: dict[str, float]) -> str:
    """`epoch 3/12  train/loss 0.4  val/loss 0.3  val/acc 0.9  812 samples/s  data wait 2%`:
    the losses, every val metric, throughput and the data-wait share."""
    extra = ("val/loss", "val/samples_per_s")
    shown = [
        "train/loss",
        "val/loss",
        *sorted(k for k in metrics if k[:4] == "val/" and k not in extra and not is_count(k)),
    ]
    values = "  ".join(f"{key} {metrics[key]:.4f}" for key in shown)
    return (
        f"epoch {epoch}/{epochs}  {values}  {metrics['train/samples_per_s']:.0f} samples/s  "
        f"data wait {100 * metrics['train/data_wait_frac']:.0f}%"
    )
