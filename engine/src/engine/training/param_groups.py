"""The optimizer's parameter groups: the one public function that builds them
(`param_groups`), from the optimizer group's `weight_decay`, `layer_decay` and
`no_decay_norm_bias`.

timm's own functions group them, as its train.py does (`create_optimizer_v2`):
`param_groups_weight_decay` puts norms, biases and every 1-D weight (and what the model's
`no_weight_decay()` names: a ViT's position embedding) in a group without weight decay, which
fine-tuning recipes leave undecayed (torchvision's `--norm-weight-decay 0`, timm's default);
`param_groups_layer_decay` scales each layer's learning rate by layer_decay ** (depth from the
top), as BEiT and MAE fine-tune, by the layers the model's `group_matcher` names (every timm
model has one). Each group carries its own `lr` (the optimizer's `lr` x its scale), so the
schedule scales them all alike.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from engine.training.distributed import unwrap


def param_groups(
    model: nn.Module,
    lr: float,
    weight_decay: float = 0.0,
    layer_decay: float | None = None,
    no_decay_norm_bias: bool = True,
) -> list[dict[str, Any]]:
    """The parameter groups of `model` (its DDP wrapper or the bare model) for an optimizer
    whose base learning rate is `lr`: every parameter in exactly one group, each group with
    its `lr` and `weight_decay`. `layer_decay` (None: off) needs a model with timm's
    `group_matcher`; `no_decay_norm_bias`: norms, biases and 1-D weights take no decay."""
    bare = unwrap(model)
    if layer_decay is None and not (no_decay_norm_bias and weight_decay > 0):  # one group
        trained = [p for p in bare.parameters() if p.requires_grad]
        return [{"params": trained, "weight_decay": weight_decay, "lr": lr}] if trained else []
    import timm.optim  # here, where grouping is asked for: 0.7 s of every run's start-up else

    skip = (
        list(bare.no_weight_decay())
        if no_decay_norm_bias and hasattr(bare, "no_weight_decay")
        else []
    )
    if layer_decay is not None:
        if not hasattr(bare, "group_matcher"):
            raise ValueError(
                f"optimizer.layer_decay={layer_decay} scales each layer's learning rate by its "
                f"depth, which {type(bare).__name__} does not name (timm models do, by their "
                "group_matcher): use model=timm, or optimizer.layer_decay=null."
            )
        groups = timm.optim.param_groups_layer_decay(
            bare,
            weight_decay,
            no_weight_decay_list=skip,
            weight_decay_exclude_1d=no_decay_norm_bias,
            layer_decay=layer_decay,
        )
    else:
        groups = timm.optim.param_groups_weight_decay(bare, weight_decay, no_weight_decay_list=skip)
    for group in groups:
        group["lr"] = lr * group.get("lr_scale", 1.0)
    return [group for group in groups if group["params"]]
