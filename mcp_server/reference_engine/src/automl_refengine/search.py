"""Search algorithms: the parameters of trial `index` as a pure function of the manifest.

Random search draws each parameter from sha256("<seed>/<index>/<name>"), not from a
stateful generator, so trial `index` has the same parameters whether it runs in the
first controller or after any number of resumes, on any Python version, and adding a
parameter does not change the draws of the others. Grid search enumerates the
cartesian product in parameter-name order, the last name varying fastest.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

from automl_refengine.manifest import (
    CategoricalParam,
    FloatParam,
    Parameter,
    ParamValue,
    Search,
)

_RANDOM_DOMAIN = "automl-refengine/random/v1"


def _unit(seed: int, index: int, name: str) -> float:
    """A uniform draw in [0, 1) with 53 bits, the precision of a float."""
    digest = hashlib.sha256(f"{_RANDOM_DOMAIN}/{seed}/{index}/{name}".encode()).digest()
    return (int.from_bytes(digest[:8], "big") >> 11) / 2**53


def _draw(param: Parameter, u: float) -> ParamValue:
    if isinstance(param, CategoricalParam):
        return param.choices[int(u * len(param.choices))]
    if isinstance(param, FloatParam):
        if param.log:
            value = math.exp(math.log(param.low) + u * (math.log(param.high) - math.log(param.low)))
        else:
            value = param.low + u * (param.high - param.low)
        # Rounding can land a hair outside the range; the range is a promise.
        return min(max(value, param.low), param.high)
    if param.log:
        span = math.log(param.high + 1) - math.log(param.low)
        value = math.floor(math.exp(math.log(param.low) + u * span))
    else:
        value = param.low + int(u * (param.high - param.low + 1))
    return min(max(value, param.low), param.high)


def _spaced(low: float, high: float, points: int, log: bool) -> list[float]:
    if log:
        a, b = math.log(low), math.log(high)
        values = [math.exp(a + (b - a) * k / (points - 1)) for k in range(points)]
    else:
        values = [low + (high - low) * k / (points - 1) for k in range(points)]
    # Pin the ends exactly: users expect low and high themselves on the grid.
    values[0], values[-1] = low, high
    return values


def grid_values(param: Parameter) -> Sequence[ParamValue]:
    if isinstance(param, CategoricalParam):
        return param.choices
    if isinstance(param, FloatParam):
        assert param.grid_points is not None  # enforced by Search for algorithm grid
        return _spaced(param.low, param.high, param.grid_points, param.log)
    if param.grid_points is None:
        return range(param.low, param.high + 1)  # lazy: wide ranges cost no memory
    spaced = _spaced(param.low, param.high, param.grid_points, param.log)
    return sorted({round(v) for v in spaced})


def grid_size(search: Search) -> int:
    return math.prod(len(grid_values(p)) for p in search.parameters.values())


def planned_trial_count(search: Search) -> int:
    """How many trials the budget allows; a grid can run out before max_trials."""
    if search.algorithm == "grid":
        return min(search.budget.max_trials, grid_size(search))
    return search.budget.max_trials


def trial_params(search: Search, index: int) -> dict[str, ParamValue] | None:
    """Parameters of trial `index`, or None once a grid is exhausted."""
    names = sorted(search.parameters)
    if search.algorithm == "random":
        return {
            name: _draw(search.parameters[name], _unit(search.seed, index, name)) for name in names
        }
    axes = [grid_values(search.parameters[name]) for name in names]
    if index >= math.prod(len(axis) for axis in axes):
        return None
    params: dict[str, ParamValue] = {}
    rest = index
    for name, axis in reversed(list(zip(names, axes, strict=True))):
        rest, position = divmod(rest, len(axis))
        params[name] = axis[position]
    return {name: params[name] for name in names}
