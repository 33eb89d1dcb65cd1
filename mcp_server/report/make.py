"""The report operation: gather the content, render the page, write it as a new file.

The file is never an overwrite of something else: `--out` must name a new file (or one holding
exactly these bytes already), and the default name beside the experiment's binding carries the
page's own sha256, so a report made again from the same records is the same file. Without
matplotlib the page is still written, with a note in place of the plots (`plots: false`)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import Field

from mcp_server.errors import InvalidInput
from mcp_server.experiments.files import ExperimentFiles
from mcp_server.fsutil import create_new_or_same
from mcp_server.report.content import STEP, ExperimentReport, gather_report
from mcp_server.report.page import render_page
from mcp_server.report.plots import missing_plots_note
from mcp_server.requests import ReportQuery


class ReportResult(ExperimentReport):
    html_path: str = Field(description="The self-contained HTML file of the report.")
    html_sha256: str = Field(description="sha256 of that file: the same records, the same bytes.")
    written: bool = Field(description="False when the file already held exactly these bytes.")
    plots: bool = Field(
        description="True when the page holds the plots; false when matplotlib is missing and "
        "they were left out (see plots_note)."
    )
    plots_note: str | None = Field(
        description="Why the plots were left out and how to add them (install the `report` "
        "extra); null when they were drawn."
    )


def _check_out(query: ReportQuery) -> None:
    if query.out is not None and not query.out.path.parent.is_dir():
        raise InvalidInput(
            STEP,
            f"the directory of {query.out} does not exist",
            "pass --out in an existing directory",
        )


def _target(query: ReportQuery, digest: str) -> Path:
    if query.out is not None:
        return query.out.path
    files = ExperimentFiles(query.workspace.path, query.experiment_id)
    return files.dir / f"report-{digest[:16]}.html"


def make_report(query: ReportQuery) -> ReportResult:
    _check_out(query)
    report = gather_report(query.experiment_id, query.workspace)
    note = missing_plots_note()  # without matplotlib the page is written without the plots
    page = render_page(report, plots_note=note).encode("utf-8")
    digest = hashlib.sha256(page).hexdigest()
    path = _target(query, digest)
    remedy = "pass --out with a new file name; existing files are never overwritten"
    written = create_new_or_same(path, page, step=STEP, what="this report", remedy=remedy)
    return ReportResult(
        **report.model_dump(),
        html_path=str(path),
        html_sha256=digest,
        written=written,
        plots=note is None,
        plots_note=note,
    )
