"""LoRA and RSLoRA adapters on `nn.Linear`, and the one merge computation both the in-place
merge and the HF export use.

    y = base(x) + scale * B @ A @ dropout(x),   scale = alpha / r   (RSLoRA: alpha / sqrt(r))

A starts Kaiming-uniform and B at zero, so an injected model starts out equal to its base.
"""

from __future__ import annotations

import math
from collections.abc import Collection

import torch
from torch import nn
from torch.nn import functional as F


class LoraInjectedLinear(nn.Module):
    """`base` (frozen) plus a rank-`r` update; adapters may have their own dtype."""

    def __init__(
        self,
        base: nn.Linear,
        r: int,
        alpha: float,
        rslora: bool = False,
        *,
        dropout: float = 0.0,
        adapter_dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise TypeError(f"LoraInjectedLinear wraps an nn.Linear, got {type(base).__name__}")
        if r < 1:
            raise ValueError(f"LoRA rank must be >= 1, got {r}")
        base.requires_grad_(False)
        self.base = base
        self.r = r
        self.alpha = alpha
        self.rslora = rslora
        self.scaling = alpha / math.sqrt(r) if rslora else alpha / r
        kwargs = {"device": base.weight.device, "dtype": adapter_dtype or base.weight.dtype}
        self.lora_A = nn.Parameter(torch.empty(r, base.in_features, **kwargs))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r, **kwargs))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.base(x)
        update = F.linear(F.linear(self.dropout(x).to(self.lora_A.dtype), self.lora_A), self.lora_B)
        return out + (self.scaling * update).to(out.dtype)


def full_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """The whole tensor, detached: one all-gather for a sharded (DTensor) one, else itself."""
    tensor = tensor.detach()
    return tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor


def merge(weight: torch.Tensor, a: torch.Tensor, b: torch.Tensor, scaling: float) -> torch.Tensor:
    """A new dense `weight + scaling * b @ a`, computed in at least fp32 (a bf16 base must not
    lose the small update to rounding before it is added) and cast back to the base dtype."""
    dtype = torch.promote_types(weight.dtype, torch.float32)
    merged = weight.to(dtype) + scaling * (b.to(dtype) @ a.to(dtype))
    return merged.to(weight.dtype)


@torch.no_grad()
def merged_weight(module: LoraInjectedLinear) -> torch.Tensor:
    """The dense weight of `module` with its update merged; the module is not changed."""
    return merge(
        full_tensor(module.base.weight),
        full_tensor(module.lora_A),
        full_tensor(module.lora_B),
        module.scaling,
    )


def inject_lora(
    model: nn.Module,
    targets: Collection[str],
    r: int,
    alpha: float,
    rslora: bool = False,
    *,
    dropout: float = 0.0,
    adapter_dtype: torch.dtype | None = None,
) -> list[str]:
    """Wrap every `nn.Linear` whose own name (last component) is in `targets`; returns the
    wrapped modules' names. Parameters other than the wrapped bases keep `requires_grad`."""
    names = [
        name
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear) and name.rpartition(".")[2] in targets
    ]
    for name in names:
        parent, _, child = name.rpartition(".")
        owner = model.get_submodule(parent)
        lora = LoraInjectedLinear(
            getattr(owner, child), r, alpha, rslora, dropout=dropout, adapter_dtype=adapter_dtype
        )
        setattr(owner, child, lora)
    return names


@torch.no_grad()
def merge_lora(model: nn.Module) -> nn.Module:
    """Merge every adapter into its base in place and put the plain base back in its place;
    returns the model (the base itself when `model` is a LoraInjectedLinear). Not for sharded
    models: export those with `export_hf`."""
    if isinstance(model, LoraInjectedLinear):
        model.base.weight.copy_(merged_weight(model))
        return model.base
    loras = [(n, m) for n, m in model.named_modules() if isinstance(m, LoraInjectedLinear)]
    for name, lora in loras:
        lora.base.weight.copy_(merged_weight(lora))
        parent, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent), child, lora.base)
    return model
