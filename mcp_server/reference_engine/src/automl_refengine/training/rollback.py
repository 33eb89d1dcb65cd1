"""Loss-spike rollback: undo a spiking update and back the learning rate off before the next one.

Detection happens in `on_before_optimizer_step` (the gradients are there), the rollback in
`on_before_zero_grad`. By then the trainer has already run `scheduler.step()`, which wrote the
rate of the *next* update into every param group. Rescaling only the schedulers' `base_lrs`
would therefore reach the update after next; the backoff multiplies the base rates *and* every
group's current `lr` by `new_scale / previous_scale`, which keeps the schedule's current
multiplier and applies the backoff to the very next `optimizer.step()`.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler

from automl_refengine.training.trainer import Optimizers, Schedulers, TrainerCallback, as_list


class LossSpikeError(RuntimeError):
    """Too many consecutive rollbacks: the run does not recover by itself."""


@dataclass
class _Snapshot:
    """Model and optimizer state after a good update, in storage of its own."""

    model: dict[str, torch.Tensor]
    optimizers: list[dict[Any, Any]]


def _owned(tree: Any) -> Any:
    """A copy of a state tree whose tensors share no storage with the live ones."""
    if isinstance(tree, torch.Tensor):
        return tree.detach().clone()
    if isinstance(tree, dict):
        return {key: _owned(value) for key, value in tree.items()}
    return tree


def _all_optimizers(optimizer: Optimizers, scheduler: Schedulers) -> list[Optimizer]:
    """The given optimizers plus those the schedulers drive, each once."""
    found: dict[int, Optimizer] = {id(o): o for o in as_list(optimizer)}
    for sched in _all_schedulers(scheduler):
        found.setdefault(id(sched.optimizer), sched.optimizer)
    return list(found.values())


def _all_schedulers(scheduler: Schedulers) -> list[LRScheduler]:
    """The schedulers, including those nested in SequentialLR/ChainedScheduler, each once:
    a nested scheduler computes its closed-form rates from its own `base_lrs`."""
    found: dict[int, LRScheduler] = {}
    todo = as_list(scheduler)
    while todo:
        sched = todo.pop(0)
        found.setdefault(id(sched), sched)
        todo.extend(getattr(sched, "_schedulers", []))
    return list(found.values())


def _device(optimizers: list[Optimizer]) -> torch.device:
    """Where a collective's tensor must live (NCCL needs the accelerator)."""
    for opt in optimizers:
        for group in opt.param_groups:
            for param in group["params"]:
                return param.device
    return torch.device("cpu")


def _on_any_rank(flag: bool, device: torch.device) -> bool:
    """`flag` OR-ed over the ranks, so that all ranks roll back or none does."""
    if not (dist.is_available() and dist.is_initialized()):
        return flag
    value = torch.tensor([float(flag)], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


class LossSpikeRollback(TrainerCallback):
    """Roll back to the last good snapshot and back the learning rate off on a spike.

    A spike is a non-finite gradient norm or loss, a gradient norm above `grad_norm_factor`
    times the median of the last `window` good updates, or a loss above `loss_factor` times
    their median loss (only while that median is positive); the ratios are judged once
    `min_history` good updates are in the window. On a spike the callback restores the newest
    snapshot (model state dict and optimizer state; a second consecutive spike falls back one
    snapshot further while more than one is kept) and multiplies the learning-rate scale by
    `backoff`, never below `min_scale`. The `max_consecutive`-th consecutive rollback is the
    last: the next spike raises `LossSpikeError`. After `recovery_steps` good updates without
    a change the scale is multiplied by `recovery` (at most 1.0), step by step.

    Snapshots: one before the first update and one after every `snapshot_every`-th good update,
    the newest `keep` kept. Under data parallelism every rank must call the hooks; the spike
    verdict is reduced across ranks (one all-reduce per update) so all ranks roll back
    together even when only one rank's loss spikes.

    A zero scale (`backoff=0` with `min_scale=0`) stays zero: neither a later backoff nor a
    recovery can leave it, and an unchanged scale is never divided by.
    """

    def __init__(
        self,
        backoff: float = 0.5,
        *,
        min_scale: float = 0.01,
        max_consecutive: int = 3,
        window: int = 50,
        min_history: int = 10,
        grad_norm_factor: float = 10.0,
        loss_factor: float | None = 3.0,
        snapshot_every: int = 10,
        keep: int = 2,
        recovery_steps: int = 100,
        recovery: float = 2.0,
    ) -> None:
        if not 0.0 <= backoff < 1.0:
            raise ValueError(f"backoff must be in [0, 1), got {backoff}")
        if not 0.0 <= min_scale <= 1.0:
            raise ValueError(f"min_scale must be in [0, 1], got {min_scale}")
        if not 1 <= min_history <= window:
            raise ValueError(f"need 1 <= min_history <= window, got {min_history}, {window}")
        if grad_norm_factor <= 1.0 or (loss_factor is not None and loss_factor <= 1.0):
            raise ValueError("grad_norm_factor and loss_factor must be > 1")
        if min(max_consecutive, snapshot_every, keep, recovery_steps) < 1 or recovery < 1.0:
            raise ValueError(
                "max_consecutive, snapshot_every, keep, recovery_steps must be >= 1"
                " and recovery >= 1"
            )
        self.backoff = backoff
        self.min_scale = min_scale
        self.max_consecutive = max_consecutive
        self.min_history = min_history
        self.grad_norm_factor = grad_norm_factor
        self.loss_factor = loss_factor
        self.snapshot_every = snapshot_every
        self.recovery_steps = recovery_steps
        self.recovery = recovery
        self.rollbacks = 0
        self.consecutive_rollbacks = 0
        self.scale = 1.0
        self.good_updates = 0
        self._grad_norms: deque[float] = deque(maxlen=window)
        self._losses: deque[float] = deque(maxlen=window)
        self._snapshots: deque[_Snapshot] = deque(maxlen=keep)
        self._quiet = 0
        # Verdict on the update in flight, from on_before_optimizer_step to on_before_zero_grad:
        # (grad norm, loss) of a good update, a reason string for a spike, None when unknown
        # (no pre-step hook ran, or the grad scaler found an overflow and skips the update).
        self._verdict: tuple[float, float | None] | str | None = None

    def on_before_optimizer_step(
        self,
        model: nn.Module,
        optimizer: Optimizers,
        scheduler: Schedulers,
        grad_scaler: torch.amp.GradScaler | None,
        *,
        loss: torch.Tensor | None = None,
    ) -> None:
        optimizers = _all_optimizers(optimizer, scheduler)
        if not self._snapshots:
            # The state before the first update is the first known-good one.
            self._snapshots.append(self._snapshot(model, optimizers))
        scaled = grad_scaler is not None and grad_scaler.is_enabled()
        if scaled:
            for opt in optimizers:
                # unscale_ twice per update raises; the trainer (or the user) may have done it
                # already, e.g. for clipping. GradScaler has no public query for this.
                if grad_scaler._per_optimizer_states[id(opt)]["stage"].name == "READY":
                    grad_scaler.unscale_(opt)
        grad_norm = self._grad_norm(optimizers)
        loss_value = None if loss is None else float(loss)
        if scaled and not math.isfinite(grad_norm):
            # An overflow under a grad scaler is routine: the scaler skips this update.
            self._verdict = None
            return
        reason = self._spike_reason(grad_norm, loss_value)
        if _on_any_rank(reason is not None, _device(optimizers)) and reason is None:
            reason = "a spike on another rank"
        self._verdict = reason if reason is not None else (grad_norm, loss_value)

    def on_before_zero_grad(
        self, model: nn.Module, optimizer: Optimizers, scheduler: Schedulers
    ) -> None:
        verdict, self._verdict = self._verdict, None
        if verdict is None:
            return
        optimizers = _all_optimizers(optimizer, scheduler)
        schedulers = _all_schedulers(scheduler)
        if isinstance(verdict, str):
            self._roll_back(model, optimizers, schedulers, verdict)
            return
        grad_norm, loss_value = verdict
        self._grad_norms.append(grad_norm)
        if loss_value is not None:
            self._losses.append(loss_value)
        self.consecutive_rollbacks = 0
        self.good_updates += 1
        if self.good_updates % self.snapshot_every == 0:
            self._snapshots.append(self._snapshot(model, optimizers))
        self._quiet += 1
        if self.scale < 1.0 and self._quiet >= self.recovery_steps:
            self._rescale(min(1.0, self.scale * self.recovery), optimizers, schedulers)
            self._quiet = 0

    def _spike_reason(self, grad_norm: float, loss: float | None) -> str | None:
        if not math.isfinite(grad_norm):
            return f"non-finite gradient norm {grad_norm}"
        if loss is not None and not math.isfinite(loss):
            return f"non-finite loss {loss}"
        if len(self._grad_norms) >= self.min_history:
            median = statistics.median(self._grad_norms)
            if grad_norm > self.grad_norm_factor * median:
                return (
                    f"gradient norm {grad_norm:.6g} > {self.grad_norm_factor} x median {median:.6g}"
                )
        if (
            loss is not None
            and self.loss_factor is not None
            and len(self._losses) >= self.min_history
        ):
            median = statistics.median(self._losses)
            if median > 0 and loss > self.loss_factor * median:
                return f"loss {loss:.6g} > {self.loss_factor} x median {median:.6g}"
        return None

    def _roll_back(
        self,
        model: nn.Module,
        optimizers: list[Optimizer],
        schedulers: list[LRScheduler],
        reason: str,
    ) -> None:
        if self.consecutive_rollbacks >= self.max_consecutive:
            raise LossSpikeError(
                f"loss spike after {self.consecutive_rollbacks} consecutive rollbacks"
                f" (max_consecutive={self.max_consecutive}, learning-rate scale {self.scale:g},"
                f" {self.rollbacks} rollbacks in total): {reason}; stopping the run"
            )
        self.consecutive_rollbacks += 1
        self.rollbacks += 1
        self._quiet = 0
        if self.consecutive_rollbacks > 1 and len(self._snapshots) > 1:
            # The newest snapshot led straight into another spike: go one further back.
            self._snapshots.pop()
        self._restore(self._snapshots[-1], model, optimizers)
        self._rescale(max(self.min_scale, self.scale * self.backoff), optimizers, schedulers)

    def _rescale(
        self, new_scale: float, optimizers: list[Optimizer], schedulers: list[LRScheduler]
    ) -> None:
        if new_scale == self.scale:
            return  # also keeps an unchanged zero scale from dividing by zero
        ratio = new_scale / self.scale
        self.scale = new_scale
        for sched in schedulers:
            # Closed-form schedules compute later rates from base_lrs.
            sched.base_lrs = [base * ratio for base in sched.base_lrs]
        for opt in optimizers:
            for group in opt.param_groups:
                # The scheduler already set this for the next update; chainable schedules also
                # derive later rates from it. A tensor lr is scaled in place (capturable steps
                # hold on to the tensor).
                if isinstance(group["lr"], torch.Tensor):
                    group["lr"].mul_(ratio)
                else:
                    group["lr"] = group["lr"] * ratio
        for sched in schedulers:
            # get_last_lr() reports the rate of the next update; keep it truthful for logs.
            sched._last_lr = [
                g["lr"].clone() if isinstance(g["lr"], torch.Tensor) else g["lr"]
                for g in sched.optimizer.param_groups
            ]

    @staticmethod
    def _snapshot(model: nn.Module, optimizers: list[Optimizer]) -> _Snapshot:
        return _Snapshot(
            model=_owned(dict(model.state_dict())),
            optimizers=[_owned(opt.state_dict()["state"]) for opt in optimizers],
        )

    @staticmethod
    def _restore(snapshot: _Snapshot, model: nn.Module, optimizers: list[Optimizer]) -> None:
        live = model.state_dict()
        with torch.no_grad():
            for key, value in snapshot.model.items():
                live[key].copy_(value)
        for opt, state in zip(optimizers, snapshot.optimizers, strict=True):
            current = opt.state_dict()
            # Only the per-parameter state goes back: the groups' hyperparameters (the lr the
            # scheduler just set) stay. The snapshot is copied again, since load_state_dict
            # keeps tensors that need no cast and the optimizer updates them in place.
            current["state"] = _owned(state)
            opt.load_state_dict(current)

    @staticmethod
    def _grad_norm(optimizers: list[Optimizer]) -> float:
        grads = [
            p.grad
            for opt in optimizers
            for group in opt.param_groups
            for p in group["params"]
            if p.grad is not None
        ]
        if not grads:
            return 0.0
        norm = torch.nn.utils.get_total_norm(grads)
        # Sharded (FSDP2) gradients give a partial norm; the full one is the same on all ranks.
        return float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)
