"""Search algorithms of the reference engine, observed through `plan --json`."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

from support.refengine import manifest_data, plan_json, write_manifest


def planned(tmp_path: Path, name: str = "m.yaml", **kwargs: Any) -> list[dict[str, Any]]:
    manifest = write_manifest(tmp_path / name, manifest_data(**kwargs))
    return [trial["params"] for trial in plan_json(manifest, tmp_path / "ws")["trials"]]


def test_random_params_are_a_pure_function_of_seed_and_index(tmp_path: Path) -> None:
    short = planned(tmp_path, "a.yaml", seed=11, max_trials=3)
    long = planned(tmp_path, "b.yaml", seed=11, max_trials=8)
    again = planned(tmp_path, "c.yaml", seed=11, max_trials=8)
    other_seed = planned(tmp_path, "d.yaml", seed=12, max_trials=8)
    assert long[:3] == short  # a longer budget does not change earlier trials
    assert again == long  # a fresh process computes the same trials
    assert other_seed != long
    assert len({(p["x"], p["y"]) for p in long}) == 8


def test_random_draws_stay_in_range_for_every_kind(tmp_path: Path) -> None:
    parameters = {
        "lr": {"type": "float", "low": 1e-5, "high": 1e-1, "log": True},
        "depth": {"type": "int", "low": 2, "high": 5},
        "width": {"type": "int", "low": 8, "high": 512, "log": True},
        "act": {"type": "categorical", "choices": ["relu", 1, 2.5, True]},
    }
    trials = planned(tmp_path, seed=5, max_trials=200, parameters=parameters)
    assert all(1e-5 <= t["lr"] <= 1e-1 for t in trials)
    assert {t["depth"] for t in trials} == {2, 3, 4, 5}
    assert all(8 <= t["width"] <= 512 and isinstance(t["width"], int) for t in trials)
    assert {repr(t["act"]) for t in trials} == {"'relu'", "1", "2.5", "True"}
    # Log scale: about as many draws below the geometric midpoint as above it.
    below = sum(t["lr"] < math.sqrt(1e-5 * 1e-1) for t in trials)
    assert 60 < below < 140


def test_grid_enumerates_the_product_in_name_order_last_fastest(tmp_path: Path) -> None:
    parameters = {
        "b": {"type": "categorical", "choices": ["p", "q"]},
        "a": {"type": "int", "low": 1, "high": 3},
        "c": {"type": "float", "low": 0.0, "high": 1.0, "grid_points": 2},
    }
    trials = planned(tmp_path, algorithm="grid", max_trials=100, parameters=parameters)
    expected = [
        {"a": a, "b": b, "c": c} for a, b, c in itertools.product([1, 2, 3], ["p", "q"], [0.0, 1.0])
    ]
    assert trials == expected  # 12 < max_trials: the grid ends the plan


def test_grid_is_cut_by_max_trials_and_log_grids_keep_their_ends(tmp_path: Path) -> None:
    parameters = {"lr": {"type": "float", "low": 0.001, "high": 1.0, "log": True, "grid_points": 4}}
    trials = planned(tmp_path, algorithm="grid", max_trials=3, parameters=parameters)
    assert [round(t["lr"], 12) for t in trials] == [0.001, 0.01, 0.1]
    full = planned(tmp_path, "b.yaml", algorithm="grid", max_trials=9, parameters=parameters)
    assert full[0]["lr"] == 0.001 and full[-1]["lr"] == 1.0


def test_int_grid_points_thin_a_wide_range(tmp_path: Path) -> None:
    parameters = {"n": {"type": "int", "low": 0, "high": 1000, "grid_points": 5}}
    trials = planned(tmp_path, algorithm="grid", max_trials=50, parameters=parameters)
    assert [t["n"] for t in trials] == [0, 250, 500, 750, 1000]
