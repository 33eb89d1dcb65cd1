"""MCP tool of the experiment report: report_experiment (the `report` operation)."""

from __future__ import annotations

from mcp.server.mcpserver import Context

from mcp_server.faces.mcp_app import Reply, call, tool
from mcp_server.faces.mcp_inputs import ExperimentId, ReportOut, Workspace
from mcp_server.faces.mcp_roots import Roots
from mcp_server.report.build import ReportResult


@tool("report")
async def report_experiment(
    experiment_id: ExperimentId,
    workspace: Workspace,
    ctx: Context,
    roots: Roots,
    out: ReportOut | None = None,
) -> Reply[ReportResult]:
    """Write the self-contained HTML report of one experiment (provenance card, attempts
    timeline, optimisation history, trials, best trial) and return its content with the
    file's path and sha256."""
    return await call(
        ctx, roots, "report", experiment_id=experiment_id, workspace=workspace, out=out
    )
