"""Export a (possibly LoRA-injected, possibly FSDP2-sharded) model as a standard HF checkpoint.

The checkpoint is `config.json` plus `model.safetensors` holding the model's state dict under
the plain module names: a LoRA module's merged dense weight as `<name>.weight` (its base bias as
`<name>.bias`), no adapter keys, wrapper components (`_orig_mod`, `_fsdp_wrapped_module`,
`_checkpoint_wrapped_module`, a DDP root's `module`) dropped. A model without LoRA exports its
state dict unchanged. Adapters exported beside unmerged base weights would be ignored by a
plain HF model, which is why a merge is the only way LoRA leaves this function.

Sharded: every rank walks the state dict in the same order and gathers each entry exactly once
(base weight, bias and both adapters of a LoRA module included); rank 0 merges and writes,
then all ranks meet at a barrier so the files exist when any rank returns.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from automl_refengine.training.lora import LoraInjectedLinear, full_tensor, merge
from automl_refengine.training.trainer import TrainerCallback

WRAPPER_COMPONENTS = frozenset({"_orig_mod", "_fsdp_wrapped_module", "_checkpoint_wrapped_module"})
ADAPTER_KEYS = ("lora_A", "lora_B")


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def _unwrap(model: nn.Module) -> nn.Module:
    """DDP puts the model under `module`; the export names start below it."""
    while isinstance(model, nn.parallel.DistributedDataParallel):
        model = model.module
    return model


def _plain(key: str) -> str:
    return ".".join(part for part in key.split(".") if part not in WRAPPER_COMPONENTS)


def _refuse_tied_bases(model: nn.Module, loras: Mapping[str, LoraInjectedLinear]) -> None:
    """A LoRA base shared with another name (tied embeddings, a reused module) would be exported
    merged under one name and unmerged, or merged twice, under the other: refuse."""
    names: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(param), []).append(name)
    for prefix, lora in loras.items():
        tied = names.get(id(lora.base.weight), [])
        if len(tied) > 1:
            raise ValueError(
                f"LoRA module {prefix!r} has a tied base weight (also {', '.join(tied)}); the"
                " merged export is ambiguous: untie the weights or do not inject LoRA there"
            )


def _lora_part(key: str, loras: Mapping[str, LoraInjectedLinear]) -> tuple[str, str] | None:
    """(LoRA module name, leaf) for an adapter or base entry of a LoRA module, else None."""
    prefix, _, leaf = key.rpartition(".")
    if prefix in loras and leaf in ADAPTER_KEYS:
        return prefix, leaf
    owner, _, role = prefix.rpartition(".")
    if owner in loras and role == "base":
        return owner, leaf
    return None


def _collision(plain: str, first: str, second: str) -> ValueError:
    return ValueError(f"export keys collide: {first!r} and {second!r} both become {plain!r}")


def export_state_dict(model: nn.Module) -> dict[str, torch.Tensor] | None:
    """The tensors `export_hf` writes (CPU copies owning their storage) on rank 0, None on the
    other ranks. Collective under sharding: every rank must call it."""
    root = _unwrap(model)
    # By plain name: some wrappers (checkpoint_wrapper) already strip their component from
    # state-dict keys, others (torch.compile) do not; both sides are compared stripped.
    loras: dict[str, LoraInjectedLinear] = {}
    lora_sources: dict[str, str] = {}
    for name, module in root.named_modules(remove_duplicate=False):
        if isinstance(module, LoraInjectedLinear):
            plain = _plain(name)
            if plain in loras:
                raise _collision(plain, lora_sources[plain], name)
            loras[plain], lora_sources[plain] = module, name
    _refuse_tied_bases(root, loras)
    writer = not _distributed() or dist.get_rank() == 0
    out: dict[str, torch.Tensor] = {}
    sources: dict[str, str] = {}
    # Parts of a LoRA module seen so far: its weight and adapters arrive as separate entries.
    parts: dict[str, dict[str, torch.Tensor]] = {}

    def put(plain: str, source: str, tensor: torch.Tensor) -> None:
        if plain in sources:
            raise _collision(plain, sources[plain], source)
        sources[plain] = source
        out[plain] = tensor.to("cpu", copy=True).contiguous()

    with torch.no_grad():
        for key, value in root.state_dict(keep_vars=True).items():
            full = full_tensor(value)  # the one gather of this entry, on every rank
            if not writer:
                continue
            part = _lora_part(_plain(key), loras)
            if part is None:
                put(_plain(key), key, full)
                continue
            name, leaf = part
            if leaf not in ("weight", *ADAPTER_KEYS):
                put(f"{name}.{leaf}", key, full)  # the base's bias: exported as it is
                continue
            got = parts.setdefault(name, {})
            got[leaf] = full
            if len(got) == 1 + len(ADAPTER_KEYS):
                weight = merge(got["weight"], got["lora_A"], got["lora_B"], loras[name].scaling)
                put(f"{name}.weight", f"{name} (merged)", weight)
                del parts[name]
    return out if writer else None


def _config_json(model: nn.Module, config: Any) -> str:
    if config is None:
        config = getattr(_unwrap(model), "config", None)
    if config is None:
        raise ValueError("export_hf needs an HF config: the model has no `config`; pass config=")
    if isinstance(config, Mapping):
        return json.dumps(config, indent=2, sort_keys=True) + "\n"
    return config.to_json_string()


def _write_atomic(path: Path, write: Callable[[Path], object]) -> None:
    temp = path.with_name(f".{path.name}.tmp")
    write(temp)
    temp.replace(path)


def export_hf(model: nn.Module, out_dir: str | os.PathLike[str], config: Any = None) -> Path | None:
    """Write `config.json` and `model.safetensors` to `out_dir`; returns the directory on rank 0
    (or without distribution), None on other ranks. `config` defaults to `model.config` (an HF
    config object, or a plain mapping for a non-HF model). Never changes the live model."""
    # Imported here: the rollback and LoRA work with torch alone.
    from safetensors.torch import save_file

    config_text = _config_json(model, config)
    tensors = export_state_dict(model)
    target = Path(out_dir)
    if tensors is not None:
        target.mkdir(parents=True, exist_ok=True)
        _write_atomic(
            target / "model.safetensors",
            lambda p: save_file(tensors, str(p), metadata={"format": "pt"}),
        )
        _write_atomic(target / "config.json", lambda p: p.write_text(config_text))
    if _distributed():
        dist.barrier()
    return target if tensors is not None else None


class HFExportCallback(TrainerCallback):
    """Export at the end of training to `out_dir`, and every `every` updates (if set) to
    `out_dir/step-NNNNNN`."""

    def __init__(
        self, out_dir: str | os.PathLike[str], every: int | None = None, config: Any = None
    ) -> None:
        if every is not None and every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self.out_dir = Path(out_dir)
        self.every = every
        self.config = config

    def on_step_end(self, model: nn.Module, step: int) -> None:
        if self.every is not None and step % self.every == 0:
            export_hf(model, self.out_dir / f"step-{step:06d}", self.config)

    def on_train_end(self, model: nn.Module) -> None:
        export_hf(model, self.out_dir, self.config)
