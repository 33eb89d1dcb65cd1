"""MCP tool of the experiment report: report_experiment (the `report` operation)."""

from __future__ import annotations

from mcp.server.mcpserver import Context

from mcp_server.faces.mcp_app import Message, reply, server
from mcp_server.faces.mcp_inputs import ExperimentId, ReportOut, Workspace
from mcp_server.faces.mcp_roots import Roots, check_roots
from mcp_server.faces.mcp_runtime import hints, run
from mcp_server.report.build import ReportResult, make_report
from mcp_server.requests import ReportQuery


class ReportReply(ReportResult):
    message: Message


@server.tool(
    **hints(
        "Write an experiment's report",
        read_only=False,  # writes one new HTML file
        destructive=False,  # never overwrites: an existing file with other bytes is refused
        idempotent=True,  # the same records give the same file
        open_world=False,
    )
)
async def report_experiment(
    experiment_id: ExperimentId,
    workspace: Workspace,
    ctx: Context,
    roots: Roots,
    out: ReportOut | None = None,
) -> ReportReply:
    """Write the self-contained HTML report of one experiment (provenance card, attempts
    timeline, optimisation history, trials, best trial) and return its content with the
    file's path and sha256."""

    def work() -> ReportReply:
        check_roots(roots, workspace=workspace, out=out)
        query = ReportQuery(experiment_id=experiment_id, workspace=workspace, out=out)
        return reply(ReportReply, "report", make_report(query))

    return await run(ctx, work)
