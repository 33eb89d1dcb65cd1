"""Text of the experiment report: where the HTML file is, and the gist of what it shows."""

from __future__ import annotations

import json

from mcp_server.report.make import ReportResult


def report_text(result: ReportResult) -> str:
    card, best = result.card, result.best
    verdict = "yes" if card.verifies_now else "no: " + "; ".join(card.verification)
    done = sum(t.state in ("succeeded", "failed") for t in result.trials)
    lines = [
        f"report: {result.html_path}" + ("" if result.written else " (unchanged)"),
        f"  sha256:   {result.html_sha256}",
        f"  engine:   {card.distribution} {card.version} commit {card.commit or '(none)'} "
        f"({card.branch or 'by commit'})",
        f"  identity: {card.identity_digest}",
        f"  verifies now in {card.checked_environment}: {verdict}",
        f"  attempts: {len(result.timeline)}; trials: {len(result.trials)} ({done} finished)",
    ]
    if best is not None:
        lines.append(f"  best:     trial {best.index} {best.value:.6g} {json.dumps(best.params)}")
    if result.plots_note is not None:
        lines.append(f"  plots:    {result.plots_note}")
    lines += [f"  note: {n}" for n in result.notes]
    return "\n".join(lines)
