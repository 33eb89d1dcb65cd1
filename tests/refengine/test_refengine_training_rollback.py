"""LossSpikeRollback driven by the engine's real Trainer (optimizer.step -> scheduler.step ->
on_before_zero_grad), with real torch optimizers and schedulers. The rate an update uses is
recorded by an optimizer step pre-hook, never read back from the groups afterwards."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

torch = pytest.importorskip("torch", reason="the training subpackage needs torch")

from support.training import Weights, linear_loss, record_rates  # noqa: E402
from torch.optim import SGD  # noqa: E402
from torch.optim.lr_scheduler import ExponentialLR, LambdaLR, LRScheduler  # noqa: E402

# isort: split
# training_helpers has put the engine source on sys.path.
from automl_refengine.training import LossSpikeError, LossSpikeRollback, Trainer  # noqa: E402

STEADY, SPIKE = 0.01, 10.0
BASE_LR, BACKOFF = 0.01, 0.5


def run(trainer: Trainer, grads: list[float]) -> None:
    for g in grads:
        trainer.step(lambda model, g=g: linear_loss(model, g))


# Schedules whose multiplier is 0.8 after 21 scheduler steps, when the update after the spike
# (update 22) runs: constant, closed-form decaying, and chainable (computed from group["lr"],
# so rescaling base_lrs alone would never reach it).
SCHEDULES: dict[str, Callable[[torch.optim.Optimizer], LRScheduler]] = {
    "constant": lambda opt: LambdaLR(opt, lambda step: 0.8),
    "linear-decay": lambda opt: LambdaLR(opt, lambda step: 1.0 - step / 105),
    "exponential": lambda opt: ExponentialLR(opt, gamma=0.8 ** (1 / 21)),
}
MULTIPLIER_AT = {
    "constant": lambda step: 0.8,
    "linear-decay": lambda step: 1.0 - step / 105,
    "exponential": lambda step: 0.8 ** (step / 21),
}


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_spike_backs_off_the_very_next_update(schedule: str) -> None:
    model = Weights()
    optimizer = SGD(model.parameters(), lr=BASE_LR)
    scheduler = SCHEDULES[schedule](optimizer)
    guard = LossSpikeRollback(backoff=BACKOFF)
    trainer = Trainer(model, optimizer, scheduler, callbacks=[guard])
    rates = record_rates(optimizer)

    run(trainer, [STEADY] * 20)
    after_20 = model.params[0].detach().clone()
    run(trainer, [SPIKE])
    assert guard.rollbacks == 1
    assert guard.scale == BACKOFF
    # The newest snapshot (after good update 20) is back: the spiking update is undone.
    assert torch.equal(model.params[0].detach(), after_20)

    run(trainer, [STEADY, STEADY])
    multiplier = MULTIPLIER_AT[schedule]
    assert rates[21] == [pytest.approx(BASE_LR * 0.8 * BACKOFF)]  # the very next update
    assert rates[22] == [pytest.approx(BASE_LR * multiplier(22) * BACKOFF)]  # and the schedule
    assert scheduler.get_last_lr() == [pytest.approx(BASE_LR * multiplier(23) * BACKOFF)]


def test_default_hooks_called_directly_detect_a_1000x_jump() -> None:
    """The public hook signatures, positional, with list arguments and no scheduler/scaler."""
    model = Weights()
    optimizer = SGD(model.parameters(), lr=BASE_LR)
    guard = LossSpikeRollback(backoff=BACKOFF)
    rates = record_rates(optimizer)
    for g in [STEADY] * 20 + [1000 * STEADY, STEADY]:
        linear_loss(model, g).backward()
        guard.on_before_optimizer_step(model, [optimizer], None, None)
        optimizer.step()
        guard.on_before_zero_grad(model, [optimizer], None)
        optimizer.zero_grad()
    assert guard.rollbacks == 1
    assert rates[21] == [pytest.approx(BASE_LR * BACKOFF)]


def test_two_optimizers_with_several_groups() -> None:
    model = Weights(1, 2, 3, 4)
    a, b, c, d = model.params
    first = SGD([{"params": [a], "lr": 0.01}, {"params": [b], "lr": 0.02}])
    second = SGD([{"params": [c], "lr": 0.03}, {"params": [d], "lr": 0.04}])
    schedulers = [LambdaLR(first, lambda step: 0.8), ExponentialLR(second, gamma=0.8 ** (1 / 21))]
    guard = LossSpikeRollback(backoff=BACKOFF)
    trainer = Trainer(model, [first, second], schedulers, callbacks=[guard])
    first_rates, second_rates = record_rates(first), record_rates(second)

    run(trainer, [STEADY] * 20 + [SPIKE, STEADY])
    assert guard.rollbacks == 1
    assert first_rates[21] == pytest.approx([0.01 * 0.8 * BACKOFF, 0.02 * 0.8 * BACKOFF])
    assert second_rates[21] == pytest.approx([0.03 * 0.8 * BACKOFF, 0.04 * 0.8 * BACKOFF])


def test_no_scheduler() -> None:
    model = Weights()
    optimizer = SGD(model.parameters(), lr=BASE_LR)
    trainer = Trainer(model, optimizer, callbacks=[LossSpikeRollback(backoff=BACKOFF)])
    rates = record_rates(optimizer)
    run(trainer, [STEADY] * 20 + [SPIKE, STEADY])
    assert rates[20] == [pytest.approx(BASE_LR)]
    assert rates[21] == [pytest.approx(BASE_LR * BACKOFF)]


def test_rate_recovers_step_by_step_after_a_quiet_window() -> None:
    model = Weights()
    optimizer = SGD(model.parameters(), lr=BASE_LR)
    scheduler = LambdaLR(optimizer, lambda step: 0.8)
    guard = LossSpikeRollback(backoff=0.25, recovery_steps=5, recovery=2.0)
    trainer = Trainer(model, optimizer, scheduler, callbacks=[guard])
    rates = record_rates(optimizer)
    run(trainer, [STEADY] * 20 + [SPIKE] + [STEADY] * 11)
    scales = [r[0] / (BASE_LR * 0.8) for r in rates]
    # Updates 22-26 at 0.25, five quiet updates later 0.5, five more and back to 1.0.
    assert scales[21:26] == pytest.approx([0.25] * 5)
    assert scales[26:31] == pytest.approx([0.5] * 5)
    assert scales[31] == pytest.approx(1.0)
    assert guard.scale == 1.0


@pytest.mark.parametrize(
    ("backoff", "min_scale", "scales"),
    [(0.5, 0.3, [0.5, 0.3, 0.3]), (0.0, 0.0, [0.0, 0.0, 0.0])],
    ids=["floor", "zero-scale"],
)
def test_backoff_is_bounded_by_the_floor(
    backoff: float, min_scale: float, scales: list[float]
) -> None:
    model = Weights()
    optimizer = SGD(model.parameters(), lr=BASE_LR)
    scheduler = LambdaLR(optimizer, lambda step: 0.8)
    guard = LossSpikeRollback(backoff=backoff, min_scale=min_scale, recovery_steps=2)
    trainer = Trainer(model, optimizer, scheduler, callbacks=[guard])
    rates = record_rates(optimizer)
    # Spikes at updates 21, 23, 25, each followed by one good update (no recovery: 2 needed).
    run(trainer, [STEADY] * 20 + [SPIKE, STEADY] * 3)
    assert guard.rollbacks == 3
    assert [rates[i][0] / (BASE_LR * 0.8) for i in (21, 23, 25)] == pytest.approx(scales)
    # The second quiet update completes a recovery window: one recovery step, and a zero scale
    # stays zero without a division by zero.
    run(trainer, [STEADY])
    assert guard.scale == pytest.approx(min(1.0, scales[-1] * 2.0))


def test_consecutive_rollbacks_are_limited() -> None:
    model = Weights()
    optimizer = SGD(model.parameters(), lr=BASE_LR)
    guard = LossSpikeRollback(backoff=BACKOFF, max_consecutive=2)
    trainer = Trainer(model, optimizer, callbacks=[guard])
    # A good update in between resets the count.
    run(trainer, [STEADY] * 20 + [SPIKE, SPIKE, STEADY, SPIKE, SPIKE])
    assert guard.rollbacks == 4
    with pytest.raises(LossSpikeError, match=r"2 consecutive rollbacks \(max_consecutive=2"):
        run(trainer, [SPIKE])
    assert guard.rollbacks == 4


@pytest.mark.parametrize("bad", ["grad-inf", "loss-nan"])
def test_non_finite_values_are_spikes_from_the_first_update(bad: str) -> None:
    model = Weights()
    optimizer = SGD(model.parameters(), lr=BASE_LR)
    guard = LossSpikeRollback(backoff=BACKOFF)
    trainer = Trainer(model, optimizer, callbacks=[guard])
    run(trainer, [STEADY] * 2)
    if bad == "grad-inf":
        run(trainer, [math.inf])
    else:
        # A NaN added to the loss leaves the gradient finite: only the loss check sees it.
        trainer.step(lambda m: linear_loss(m, STEADY) + torch.tensor(math.nan))
    assert guard.rollbacks == 1
    # Before any periodic snapshot the state before the first update is the one restored.
    assert torch.equal(model.params[0].detach(), torch.ones(1))


def test_snapshots_own_their_storage() -> None:
    model = Weights()
    optimizer = SGD(model.parameters(), lr=BASE_LR, momentum=0.9)
    guard = LossSpikeRollback(backoff=BACKOFF, snapshot_every=5, min_history=3)
    trainer = Trainer(model, optimizer, callbacks=[guard])
    run(trainer, [STEADY] * 5)
    param = model.params[0]
    weight, momentum = param.detach().clone(), optimizer.state[param]["momentum_buffer"].clone()
    # In-place SGD updates after the snapshot and after each restore must not reach it.
    for _ in range(2):
        run(trainer, [STEADY, STEADY, SPIKE])
        assert torch.equal(param.detach(), weight)
        assert torch.equal(optimizer.state[param]["momentum_buffer"], momentum)
    assert guard.rollbacks == 2


def test_overflow_under_an_enabled_grad_scaler_is_not_a_spike() -> None:
    model = Weights()
    optimizer = SGD(model.parameters(), lr=BASE_LR)
    scaler = torch.amp.GradScaler("cpu")
    guard = LossSpikeRollback(backoff=BACKOFF)
    trainer = Trainer(model, optimizer, callbacks=[guard], grad_scaler=scaler)
    run(trainer, [STEADY] * 20 + [math.inf, STEADY])
    assert guard.rollbacks == 0
    assert scaler.get_scale() < 2.0**16  # the scaler saw the overflow and backed off itself


def test_disabled_by_default() -> None:
    model = Weights()
    optimizer = SGD(model.parameters(), lr=BASE_LR)
    trainer = Trainer(model, optimizer)
    assert trainer.callbacks == ()
    run(trainer, [STEADY] * 20)
    before = model.params[0].detach().clone()
    run(trainer, [SPIKE])
    assert torch.allclose(model.params[0].detach(), before - BASE_LR * SPIKE)
