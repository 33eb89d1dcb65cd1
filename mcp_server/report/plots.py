"""The report's plots, drawn by matplotlib (the `report` extra) as SVG: the optimisation history
(objective per trial and the best so far) and one parameter/objective scatter per parameter.

The SVG is deterministic: a fixed hash salt for its element ids, no creation date, one bundled
font (DejaVu Sans, shipped with matplotlib) drawn as paths, so the same trials give the same
bytes on every run. Without matplotlib the report is still written, without the plots:
`missing_plots_note()` is then the note shown in their place, naming the extra to install."""

from __future__ import annotations

import importlib
import io
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from mcp_server.errors import SetupError
from mcp_server.experiments.trials import ParamValue, Trial

EXTRA = "report"
_RC = {
    "svg.hashsalt": "automl-setup-report",
    "svg.fonttype": "path",
    "font.family": "DejaVu Sans",
    "font.size": 9.0,
    "axes.grid": True,
    "grid.alpha": 0.3,
}
_POINT, _BEST, _FAILED = "#1f77b4", "#d62728", "#7f7f7f"


INSTALL = f"pip install 'automl-setup[{EXTRA}]'"
UV_INSTALL = f"uv tool install 'automl-setup[{EXTRA}]'"


def _import_matplotlib() -> ModuleType | None:
    try:
        return importlib.import_module("matplotlib")
    except ImportError:
        return None


def missing_plots_note() -> str | None:
    """None when matplotlib is importable (the plots are drawn); otherwise the note the page,
    the JSON and the text show in their place: the plots were left out, and how to add them."""
    if _import_matplotlib() is not None:
        return None
    return (
        "The plots were left out: matplotlib is not installed. To add them, install the "
        f"`{EXTRA}` extra ({INSTALL}, or {UV_INSTALL}) and make the report again."
    )


def plotting_available() -> bool:
    return missing_plots_note() is None


def _matplotlib() -> ModuleType:
    mpl = _import_matplotlib()
    if mpl is None:  # the page asks missing_plots_note() first; this is only a guard
        raise SetupError(
            "report",
            "the report's plots need matplotlib, which is not installed",
            f"install the `{EXTRA}` extra: {INSTALL}",
        )
    return mpl


@contextmanager
def _figure(width: float, height: float) -> Iterator[Any]:
    mpl = _matplotlib()
    figure_module = importlib.import_module("matplotlib.figure")
    with mpl.rc_context(_RC):
        yield figure_module.Figure(figsize=(width, height), dpi=100, layout="constrained")


def _svg(fig: Any) -> str:
    out = io.BytesIO()
    fig.savefig(out, format="svg", metadata={"Date": None})
    return out.getvalue().decode("utf-8")


def _succeeded(trials: list[Trial]) -> list[Trial]:
    return [t for t in trials if t.state == "succeeded" and t.value is not None]


def history_svg(trials: list[Trial], metric: str, minimize: bool) -> str:
    """Objective per trial (failed trials marked on the axis) and the best so far."""
    with _figure(7.0, 3.2) as fig:
        ax = fig.add_subplot()
        done = _succeeded(trials)
        xs, ys = [t.index for t in done], [float(t.value or 0.0) for t in done]
        ax.scatter(xs, ys, color=_POINT, label=metric, zorder=3)
        best: list[float] = []
        for y in ys:
            best.append(y if not best else (min if minimize else max)(best[-1], y))
        ax.step(xs, best, where="post", color=_BEST, label="best so far", zorder=2)
        failed = [t.index for t in trials if t.state == "failed"]
        if failed:
            ax.scatter(failed, [min(ys, default=0.0)] * len(failed), marker="x", color=_FAILED)
            ax.scatter([], [], marker="x", color=_FAILED, label="failed")
        ax.set_xlabel("trial")
        ax.set_ylabel(metric)
        ax.set_title("Optimisation history")
        ax.legend(loc="best")
        return _svg(fig)


def _positions(values: list[ParamValue]) -> tuple[list[float], list[str] | None]:
    """Numbers plot as they are; categories (and booleans) at 0, 1, ... in first-seen order."""
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return [float(v) for v in values], None
    labels = list(dict.fromkeys(str(v) for v in values))
    return [float(labels.index(str(v))) for v in values], labels


def scatter_svg(trials: list[Trial], metric: str) -> str:
    """One panel per parameter: its value against the objective, per succeeded trial."""
    done = _succeeded(trials)
    names = sorted({name for t in done for name in t.params})
    columns = min(3, max(1, len(names)))
    rows = max(1, -(-len(names) // columns))
    with _figure(3.2 * columns, 2.6 * rows) as fig:
        axes = fig.subplots(rows, columns, squeeze=False)
        for n, ax in enumerate(axes.flat):
            if n >= len(names):
                ax.set_visible(False)
                continue
            name = names[n]
            having = [t for t in done if name in t.params]
            xs, labels = _positions([t.params[name] for t in having])
            ax.scatter(xs, [float(t.value or 0.0) for t in having], color=_POINT)
            if labels is not None:
                ax.set_xticks(range(len(labels)), labels)
            ax.set_xlabel(name)
            ax.set_ylabel(metric)
        fig.suptitle("Parameters against the objective")
        return _svg(fig)
