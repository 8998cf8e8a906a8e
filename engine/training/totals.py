"""Running totals of one train or val pass: the loss and every metric's sums, on the device."""

from __future__ import annotations

from typing import Any

import torch

from engine.training.metric import Metric


class PassTotals:
    """Summed loss and metric sums of a pass, kept on the device so no batch forces a sync."""

    def __init__(self, device: torch.device, metrics: dict[str, Metric]) -> None:
        self.metrics = metrics
        self.loss_sum = torch.zeros((), device=device)
        self.samples = 0
        self.sums = {name: metric.sums(device) for name, metric in metrics.items()}

    def add(self, mean_loss: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor) -> None:
        """Account one batch (`mean_loss` is the batch's mean loss)."""
        self.loss_sum += mean_loss.detach() * len(labels)
        self.samples += len(labels)
        logits = logits.detach()
        for name, metric in self.metrics.items():
            metric.update(self.sums[name], logits, labels)

    def tensors(self) -> list[torch.Tensor]:
        """Every running sum (what the ranks of a distributed job add up)."""
        return [self.loss_sum, *(t for sums in self.sums.values() for t in sums.values())]

    def state_dict(self) -> dict[str, Any]:
        """The running sums, to continue a part-finished epoch after a resume."""
        return {"loss_sum": self.loss_sum, "samples": self.samples, "sums": self.sums}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from `state_dict()`'s sums."""
        self.loss_sum.copy_(state["loss_sum"])
        self.samples = state["samples"]
        for name, sums in self.sums.items():
            for key, tensor in sums.items():
                tensor.copy_(state["sums"][name][key])

    def means(self, prefix: str, empty_hint: str) -> dict[str, float]:
        """`{prefix}/loss` and `{prefix}/<metric>`; a pass without samples is an error."""
        if self.samples == 0:
            raise RuntimeError(f"the {prefix} loader yielded no samples; {empty_hint}")
        means = {f"{prefix}/loss": self.loss_sum.item() / self.samples}
        for name, metric in self.metrics.items():
            means[f"{prefix}/{name}"] = metric.value(self.sums[name], self.samples)
        return means


def sum_states(states: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """The `PassTotals.state_dict()`s of several ranks added into one (None: none has any)."""
    present = [s for s in states if s is not None]
    if not present:
        return None
    total = {
        "loss_sum": sum(s["loss_sum"] for s in present),
        "samples": sum(s["samples"] for s in present),
        "sums": {
            name: {key: sum(s["sums"][name][key] for s in present) for key in sums}
            for name, sums in present[0]["sums"].items()
        },
    }
    return total
