"""The report as one self-contained HTML page: inline CSS, the plots as inline SVG images (data
URIs), no script, and a content security policy that forbids any fetch, so it opens from disk
anywhere and can itself be hashed and attached. Every text from the records is escaped.
Without matplotlib a visible note (`#plots-missing`) stands where the plots would be."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from html import escape

from mcp_server import __build__
from mcp_server.experiments.trials import Trial
from mcp_server.report.content import ExperimentReport, ProvenanceCard
from mcp_server.report.plots import history_svg, scatter_svg

GENERATOR = f"automl-setup {__build__} report"
_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
_CSS = """
body { font-family: "DejaVu Sans", Arial, sans-serif; margin: 2em auto; max-width: 1100px;
       color: #1a1a1a; background: #fff; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 1.8em; }
table { border-collapse: collapse; width: 100%; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: left; vertical-align: top;
         overflow-wrap: break-word; }
.wide { overflow-wrap: anywhere; min-width: 10em; }
th { background: #f0f0f0; }
code, .mono { font-family: "DejaVu Sans Mono", monospace; word-break: break-all; }
#card { border: 2px solid #444; border-radius: 6px; padding: 0.5em 1em; background: #fafafa; }
#card th { width: 14em; }
.ok { color: #176f2c; font-weight: bold; } .bad { color: #b00020; font-weight: bold; }
.plot img { max-width: 100%; height: auto; display: block; margin: 0.5em 0; }
"""


def _text(value: object) -> str:
    return escape("" if value is None else str(value))


def _table(headers: list[str], rows: Iterable[Iterable[object]], ident: str, wide: set[str]) -> str:
    """A table; the columns named in `wide` hold long text that may break anywhere."""
    marks = [' class="wide"' if name in wide else "" for name in headers]
    head = "<tr>" + "".join(f"<th>{_text(name)}</th>" for name in headers) + "</tr>"
    body = "\n".join(
        "<tr>" + "".join(f"<td{m}>{_text(c)}</td>" for m, c in zip(marks, r, strict=True)) + "</tr>"
        for r in rows
    )
    return f'<table id="{ident}">\n{head}\n{body}\n</table>'


def _versions(versions: dict[str, str | None]) -> str:
    return ", ".join(f"{name} {v or 'absent'}" for name, v in sorted(versions.items())) or "none"


def _card(card: ProvenanceCard) -> str:
    fields = [
        ("Engine repository", card.repository),
        ("Subdirectory", card.subdirectory),
        ("Branch", card.branch or "(installed by commit)"),
        ("Commit", card.commit),
        ("Subtree id", card.subtree_id),
        ("Distribution", f"{card.distribution} {card.version}"),
        ("Wheel sha256", card.wheel_sha256),
        ("RECORD digest", card.record_digest),
        ("Identity digest", card.identity_digest),
        ("Python", card.python),
        ("Platform", card.platform),
        ("Dependencies", _versions(card.dependencies)),
        ("Watched packages", _versions(card.watched)),
        ("torch CUDA", card.torch_cuda or "none"),
        ("Manifest sha256", card.manifest_sha256),
        ("Bound", card.launched),
        ("Checked environment", card.checked_environment),
    ]
    rows = "\n".join(
        f'<tr><th>{_text(name)}</th><td class="mono">{_text(value)}</td></tr>'
        for name, value in fields
    )
    verdict = (
        '<span class="ok">yes: it holds exactly the bound build</span>'
        if card.verifies_now
        else '<span class="bad">no</span><ul>'
        + "".join(f"<li>{_text(p)}</li>" for p in card.verification)
        + "</ul>"
    )
    return (
        f'<section id="card"><h2>Provenance</h2>\n<table>\n{rows}\n'
        f'<tr><th>Verifies now</th><td id="verifies-now">{verdict}</td></tr>\n</table></section>'
    )


def _image(svg: str, ident: str, alt: str) -> str:
    data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return f'<div class="plot"><img id="{ident}" alt="{escape(alt)}" src="data:image/svg+xml;base64,{data}"></div>'  # noqa: E501


def _params(params: dict[str, object]) -> str:
    return json.dumps(params, sort_keys=True)


def _metrics(trial: Trial) -> str:
    return ", ".join(f"{k} {v:g}" for k, v in sorted(trial.metrics.items()))


def _trials(report: ExperimentReport) -> str:
    rows = [
        (
            t.index,
            _params(dict(t.params)),
            "" if t.value is None else f"{t.value:.6g}",
            t.state,
            "" if t.duration_s is None else f"{t.duration_s:.3f}",
            t.attempts,
            _metrics(t),
            t.detail,
        )
        for t in report.trials
    ]
    headers = ["trial", "params", "objective", "state", "seconds", "attempts", "metrics", "detail"]
    return _table(headers, rows, "trials", {"params", "metrics", "detail"})


def _sft(report: ExperimentReport) -> str:
    """The SFT candidates, when the trials are of the `sft` workload."""
    if not report.sft:
        return ""
    params = {t.index: _params(dict(t.params)) for t in report.trials}
    rows = [
        (index, params.get(index, ""), o.steps, o.rollbacks, f"{o.score}/{o.questions}",
         o.export_sha256)
        for index, o in sorted(report.sft.items())
    ]  # fmt: skip
    headers = ["trial", "params", "steps", "rollbacks", "score", "export sha256"]
    return "<h2>SFT candidates</h2>\n" + _table(headers, rows, "sft", {"export sha256"})


def _best(trial: Trial | None) -> str:
    if trial is None:
        return '<p id="best">No trial has succeeded yet.</p>'
    return (
        f'<p id="best">Trial {trial.index}: objective <b>{trial.value:.6g}</b> with '
        f"<code>{_text(_params(dict(trial.params)))}</code></p>"
    )


_MISSING_STYLE = (
    "border: 3px solid #b00020; border-radius: 6px; padding: 0.6em 1em; background: #fff3f3; "
    "color: #b00020; font-weight: bold;"
)


def _missing(note: str) -> str:
    """In place of the plots when matplotlib is missing: loud, and saying how to add them. Text
    content needs no quote escaping, so the install command reads as it is typed."""
    return f'<p id="plots-missing" style="{_MISSING_STYLE}">{escape(note, quote=False)}</p>'


def _plots(report: ExperimentReport, plots_note: str | None) -> str:
    if plots_note is not None:
        return _missing(plots_note)
    objective = report.objective
    if not any(t.state == "succeeded" for t in report.trials) or objective is None:
        return "<p>No succeeded trial to plot yet.</p>"
    metric, minimize = objective.metric, objective.direction == "minimize"
    return _image(
        history_svg(report.trials, metric, minimize), "history", "optimisation history"
    ) + _image(scatter_svg(report.trials, metric), "scatter", "parameters against the objective")


def _timeline(report: ExperimentReport) -> str:
    rows = [
        (e.attempt, e.time, e.action, e.outcome, e.host, e.pid, e.exit_code, e.environment,
         e.reason, "; ".join(e.details))
        for e in report.timeline
    ]  # fmt: skip
    headers = ["#", "time", "action", "outcome", "host", "pid", "exit", "environment", "reason",
               "details"]  # fmt: skip
    return _table(headers, rows, "timeline", {"environment", "reason", "details"})


def _objective(report: ExperimentReport) -> str:
    objective = report.objective
    return "unknown" if objective is None else _text(f"{objective.metric} ({objective.direction})")


def render_page(report: ExperimentReport, *, plots_note: str | None) -> str:
    """The page; the same report gives the same bytes. With a `plots_note` (matplotlib is
    missing: `plots.missing_plots_note()`) the note stands where the plots would be."""
    notes = "".join(f"<li>{_text(n)}</li>" for n in report.notes)
    succeeded = sum(t.state == "succeeded" for t in report.trials)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{_CSP}">
<meta name="generator" content="{escape(GENERATOR)}">
<title>Experiment {_text(report.experiment_id)}: report</title>
<style>{_CSS}</style>
</head>
<body>
<h1>Experiment <code>{_text(report.experiment_id)}</code></h1>
<p>Workspace <code>{_text(report.workspace)}</code>. Objective: {_objective(report)}.
{len(report.trials)} trials ({succeeded} succeeded).</p>
{f'<ul id="notes">{notes}</ul>' if notes else ""}
{_card(report.card)}
<h2>Attempts</h2>
{_timeline(report)}
<h2>Optimisation history</h2>
{_plots(report, plots_note)}
<h2>Best trial</h2>
{_best(report.best)}
{_sft(report)}
<h2>Trials</h2>
{_trials(report)}
<p><small>Made by {escape(GENERATOR)} from the experiment's binding and ledgers.</small></p>
</body>
</html>
"""
