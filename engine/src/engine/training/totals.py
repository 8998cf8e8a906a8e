"""Running totals of one train or val pass: the loss and every metric's sums, on the device;
and, when a metric needs them (GatheredMetric), every sample's logits and labels.

Kept rather than torchmetrics.Metric (tried: `make bench-totals`, BENCHMARKS.md): its update
of the loss mean and accuracy took 5.4x as long per batch (71 against 13 µs, batch 32, one CPU
thread), it syncs each state of each metric in a collective of its own where these sums go in
one all_reduce (engine/training/distributed.py), and a mid-epoch checkpoint saves these sums
as they are. torchmetrics does compute what needs every sample (mode=eval's per-class AP)."""

from __future__ import annotations

from typing import Any

import torch

from engine.training.metric import AnyMetric, GatheredMetric


class PassTotals:
    """Summed loss and metric sums of a pass, kept on the device so no batch forces a sync."""

    def __init__(self, device: torch.device, metrics: dict[str, AnyMetric]) -> None:
        self.metrics = metrics
        self.loss_sum = torch.zeros((), device=device)
        self.samples = 0
        self.sums = {
            name: metric.sums(device)
            for name, metric in metrics.items()
            if not isinstance(metric, GatheredMetric)
        }
        gathered = any(isinstance(m, GatheredMetric) for m in metrics.values())
        # the pass's rows, batch by batch (concatenated once, when read)
        self.rows: dict[str, list[torch.Tensor]] | None = (
            {"logits": [], "labels": []} if gathered else None
        )

    def add(self, mean_loss: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor) -> None:
        """Account one batch (`mean_loss` is the batch's mean loss)."""
        self.loss_sum += mean_loss.detach() * len(labels)
        self.samples += len(labels)
        logits = logits.detach()
        for name, sums in self.sums.items():
            self.metrics[name].update(sums, logits, labels)  # type: ignore[union-attr]
        if self.rows is not None:
            self.rows["logits"].append(logits.float())
            self.rows["labels"].append(labels.detach())

    def row_tensors(self) -> dict[str, torch.Tensor]:
        """The pass's logits and labels, one row per sample (empty without a gathered metric)."""
        if self.rows is None:
            return {}
        return {key: torch.cat(parts) for key, parts in self.rows.items() if parts}

    def set_rows(self, rows: dict[str, torch.Tensor]) -> None:
        """Replace the pass's rows (by every rank's, after a gather; by a checkpoint's)."""
        if self.rows is not None:
            self.rows = {key: [rows[key]] if key in rows else [] for key in self.rows}

    def tensors(self) -> list[torch.Tensor]:
        """Every running sum (what the ranks of a distributed job add up)."""
        return [self.loss_sum, *(t for sums in self.sums.values() for t in sums.values())]

    def state_dict(self) -> dict[str, Any]:
        """The running sums (and rows), to continue a part-finished epoch after a resume."""
        state = {"loss_sum": self.loss_sum, "samples": self.samples, "sums": self.sums}
        return state | {"rows": self.row_tensors()} if self.rows is not None else state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from `state_dict()`'s sums."""
        self.loss_sum.copy_(state["loss_sum"])
        self.samples = state["samples"]
        for name, sums in self.sums.items():
            for key, tensor in sums.items():
                tensor.copy_(state["sums"][name][key])
        device = self.loss_sum.device
        self.set_rows({k: v.to(device) for k, v in state.get("rows", {}).items()})

    def means(self, prefix: str, empty_hint: str) -> dict[str, float]:
        """`{prefix}/loss` and `{prefix}/<metric>`; a pass without samples is an error."""
        if self.samples == 0:
            raise RuntimeError(f"the {prefix} loader yielded no samples; {empty_hint}")
        means = {f"{prefix}/loss": self.loss_sum.item() / self.samples}
        rows = self.row_tensors()
        for name, metric in self.metrics.items():
            if isinstance(metric, GatheredMetric):
                means[f"{prefix}/{name}"] = metric.value(rows["logits"], rows["labels"])
            else:
                means[f"{prefix}/{name}"] = metric.value(self.sums[name], self.samples)
        return means


def sum_states(states: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """The `PassTotals.state_dict()`s of several ranks added into one (None: none has any);
    their rows, when kept, one after the other."""
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
    if "rows" in present[0]:
        keys = {key for s in present for key in s["rows"]}
        total["rows"] = {
            key: torch.cat([s["rows"][key].cpu() for s in present if key in s["rows"]])
            for key in keys
        }
    return total
