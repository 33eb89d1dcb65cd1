"""Helpers for the reference engine's training tests: tiny real models, a learning-rate
recorder, a collective recorder and the two-rank FSDP2 worker (spawned, so it lives in an
importable module). Importing this module puts the engine source on sys.path and makes the
Hugging Face hub offline: nothing is ever downloaded."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from support.refengine import ENGINE_SRC

os.environ["HF_HUB_OFFLINE"] = "1"
if str(ENGINE_SRC) not in sys.path:
    sys.path.insert(0, str(ENGINE_SRC))

import torch
from automl_refengine.training import (
    LoraInjectedLinear,
    LossSpikeRollback,
    Trainer,
    export_hf,
    inject_lora,
)
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

LORA_TARGETS = ("q_proj", "v_proj", "down_proj")


class Weights(nn.Module):
    """Bare parameters: with `linear_loss` every gradient element is exactly the batch value."""

    def __init__(self, *sizes: int) -> None:
        super().__init__()
        self.params = nn.ParameterList(nn.Parameter(torch.ones(n)) for n in sizes or (1,))


def linear_loss(model: Weights, g: float) -> torch.Tensor:
    return sum(p.sum() for p in model.params) * g


def record_rates(optimizer: torch.optim.Optimizer) -> list[list[float]]:
    """The lr of every group as each `optimizer.step()` starts (what the update really uses)."""
    rates: list[list[float]] = []
    optimizer.register_step_pre_hook(
        lambda opt, args, kwargs: rates.append([float(g["lr"]) for g in opt.param_groups])
    )
    return rates


def tiny_causal_lm(seed: int = 0, tie: bool = False) -> nn.Module:
    """A randomly initialised Qwen2 causal LM small enough for 2 shared CPU cores."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=128,
        tie_word_embeddings=tie,
    )
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(config).eval()


def tiny_lora_lm(seed: int = 0, rslora: bool = False) -> nn.Module:
    """`tiny_causal_lm` with LoRA on attention and MLP projections and nonzero adapters (fresh
    B is zero, which would make a missing merge invisible)."""
    model = tiny_causal_lm(seed)
    inject_lora(model, LORA_TARGETS, r=4, alpha=8.0, rslora=rslora)
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, LoraInjectedLinear):
                module.lora_B.copy_(torch.randn(module.lora_B.shape, generator=generator) * 0.5)
    return model


def token_ids(seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 128, (2, 7), generator=torch.Generator().manual_seed(seed))


class CollectiveRecorder(TorchDispatchMode):
    """Every c10d collective (functional or not) dispatched while active: op name and the shape
    of its input, in call order."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, list[int]]] = []

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        if "c10d" in func.namespace:
            first = args[0] if args else None
            shape = list(first.shape) if isinstance(first, torch.Tensor) else []
            self.calls.append((func.name(), shape))
        return func(*args, **(kwargs or {}))


def fsdp_worker(rank: int, world_size: int, out: str) -> None:
    """One rank of the two-rank CPU run; results go to files under `out` for the test."""
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    torch.set_num_threads(1)
    root = Path(out)
    dist.init_process_group(
        "gloo", init_method=f"file://{root / 'store'}", rank=rank, world_size=world_size
    )
    try:
        report: dict[str, Any] = {}
        for kind, model in (("lora", tiny_lora_lm()), ("dense", tiny_causal_lm())):
            # Same seed on both ranks: identical full models, each rank keeps its shards.
            for layer in model.model.layers:
                fully_shard(layer)
            fully_shard(model)
            with torch.no_grad():
                logits = model(token_ids()).logits
            with CollectiveRecorder() as recorder:
                export_hf(model, root / kind)
            state = model.state_dict().values()
            report[kind] = {
                "calls": recorder.calls,
                "sharded_entries": sum(hasattr(v, "full_tensor") for v in state),
                "local_shapes": [list(v.to_local().shape) for v in state],
            }
            if rank == 0:
                torch.save(logits, root / f"{kind}-logits.pt")
        report["rollbacks"] = _rollback_on_one_rank(rank)
        (root / f"rank{rank}.json").write_text(json.dumps(report))
    finally:
        dist.destroy_process_group()
    # Done, and every result is in its file: leave without the interpreter's finalization. Gloo's
    # worker threads can outlive destroy_process_group (the sharded modules still hold the
    # group), and tearing them down during finalization now and then aborts the rank
    # ("terminate called without an active exception", SIGABRT: once in CI, once in 27 runs
    # here). An exception above still reaches spawn, which reports it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _rollback_on_one_rank(rank: int) -> int:
    """Only rank 1's loss is non-finite at update 21; the shared verdict rolls both back."""
    model = Weights()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    guard = LossSpikeRollback()
    trainer = Trainer(model, optimizer, callbacks=[guard])
    for step in range(22):
        bad = rank == 1 and step == 20
        offset = torch.tensor(float("nan") if bad else 0.0)
        trainer.step(lambda m, offset=offset: linear_loss(m, 0.01) + offset)
    return guard.rollbacks
