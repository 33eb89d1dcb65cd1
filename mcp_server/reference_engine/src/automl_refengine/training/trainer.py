"""A minimal trainer loop whose callback order is the contract the guards are written against.

One update is:

    loss = loss_fn(model, batch); backward
    callbacks.on_before_optimizer_step
    optimizer.step()            (every optimizer; through the grad scaler when there is one)
    scheduler.step()            (every scheduler)
    callbacks.on_before_zero_grad
    optimizer.zero_grad()
    callbacks.on_step_end

and `on_train_end` once after the last batch. A callback that changes the learning rate in
`on_before_zero_grad` therefore runs after the scheduler has already set the rate of the next
update: it must change the param groups' `lr`, not only the scheduler's base rates.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

import torch
from torch import nn
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler

Batch = TypeVar("Batch")
T = TypeVar("T")

# Hooks receive what the trainer was given: one object or a list of them.
Optimizers = Optimizer | Sequence[Optimizer]
Schedulers = LRScheduler | Sequence[LRScheduler] | None


def as_list(value: T | Sequence[T] | None) -> list[T]:
    """The hooks' "one, several or None" arguments as a list."""
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return list(value)
    return [value]  # type: ignore[list-item]


class TrainerCallback:
    """No-op hooks; subclasses override the ones they need."""

    def on_before_optimizer_step(
        self,
        model: nn.Module,
        optimizer: Optimizers,
        scheduler: Schedulers,
        grad_scaler: torch.amp.GradScaler | None,
        *,
        loss: torch.Tensor | None = None,
    ) -> None:
        """Gradients are complete (still scaled if there is a grad scaler); nothing updated yet."""

    def on_before_zero_grad(
        self, model: nn.Module, optimizer: Optimizers, scheduler: Schedulers
    ) -> None:
        """The update and the scheduler step are done; gradients are still there."""

    def on_step_end(self, model: nn.Module, step: int) -> None:
        """Update number `step` (1-based) is complete."""

    def on_train_end(self, model: nn.Module) -> None:
        """The last batch has been trained on."""


class Trainer:
    """Runs updates in the order documented at the top of this module."""

    def __init__(
        self,
        model: nn.Module,
        optimizer: Optimizers,
        scheduler: Schedulers = None,
        callbacks: Sequence[TrainerCallback] = (),
        grad_scaler: torch.amp.GradScaler | None = None,
    ) -> None:
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        # No guard unless asked for: the rollback and the export are opt-in callbacks.
        self.callbacks = tuple(callbacks)
        self.grad_scaler = grad_scaler
        self.step_count = 0

    def step(self, loss_fn: Callable[[nn.Module], torch.Tensor]) -> torch.Tensor:
        """One update; returns the (detached) loss."""
        loss = loss_fn(self.model)
        (self.grad_scaler.scale(loss) if self.grad_scaler else loss).backward()
        detached = loss.detach()
        for callback in self.callbacks:
            callback.on_before_optimizer_step(
                self.model, self.optimizer, self.scheduler, self.grad_scaler, loss=detached
            )
        for optimizer in as_list(self.optimizer):
            if self.grad_scaler:
                self.grad_scaler.step(optimizer)
            else:
                optimizer.step()
        if self.grad_scaler:
            self.grad_scaler.update()
        for scheduler in as_list(self.scheduler):
            scheduler.step()
        for callback in self.callbacks:
            callback.on_before_zero_grad(self.model, self.optimizer, self.scheduler)
        for optimizer in as_list(self.optimizer):
            optimizer.zero_grad(set_to_none=True)
        self.step_count += 1
        for callback in self.callbacks:
            callback.on_step_end(self.model, self.step_count)
        return detached

    def fit(
        self, batches: Iterable[Batch], loss_fn: Callable[[nn.Module, Batch], torch.Tensor]
    ) -> int:
        """One update per batch, then `on_train_end`; returns the number of updates run."""
        for batch in batches:
            self.step(lambda model, batch=batch: loss_fn(model, batch))
        for callback in self.callbacks:
            callback.on_train_end(self.model)
        return self.step_count
