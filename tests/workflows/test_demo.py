"""`automl-setup demo`: the whole story, end to end, as a real process: the `automl-setup` of
the built wheel, installed without extras into a fresh venv, run outside the checkout."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from support.cli import outside_env, run_cli
from support.engines import WheelInstall


@pytest.mark.slow
def test_demo_runs_the_story_and_shows_the_refusal_field_by_field(
    tmp_path: Path, wheel_install: WheelInstall
) -> None:
    workdir = tmp_path / "demo"

    proc = subprocess.run(
        [wheel_install.script("automl-setup"), "demo", "--workdir", str(workdir)],
        capture_output=True, text=True, cwd=tmp_path, env=outside_env(),
        stdin=subprocess.DEVNULL, timeout=300, check=False,
    )  # fmt: skip

    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "DEMO OK" in out and "DEMO FAILED" not in out
    heads = dict(re.findall(r"^\s+(main|dev/next) -> ([0-9a-f]{40})$", out, re.M))
    main, dev = heads["main"], heads["dev/next"]
    assert main != dev

    # Interrupted by SIGTERM part way, then resumed to the end on the same build.
    stopped = re.search(r"after SIGTERM: state interrupted, (\d+) of (\d+) trials", out)
    assert stopped is not None, out
    assert 0 < int(stopped.group(1)) < int(stopped.group(2))
    assert "engine exit code 0; state completed" in out
    assert f"commit:   {main}" in out

    # The refusal on the dev/next build, with its field diffs and the recreate command.
    refusal = out[out.index("refused, as it must be") :]
    assert "is not the build experiment demo-quadratic is bound to" in refusal
    assert f"source.commit: recorded {main}, found {dev}" in refusal
    for field in ("source.subtree_id", "build.wheel_sha256", "build.record_digest"):
        assert f"- {field}: recorded " in refusal
    assert "automl-setup recreate --experiment-id demo-quadratic " in refusal
    assert "automl-setup resume --experiment-id demo-quadratic " in refusal

    # What the demo left behind agrees with what it printed.
    workspace = workdir / "workspace"
    status = run_cli(
        "status", "--experiment-id", "demo-quadratic", "--workspace", str(workspace), "--json"
    )
    assert status.code == 0, status.output
    data = json.loads(status.stdout)
    assert data["state"] == "completed" and data["trials_done"] == int(stopped.group(2))
    assert data["bound_commit"] == main
    attempts = workspace / ".automl-setup" / "demo-quadratic" / "attempts.jsonl"
    entries = [json.loads(line) for line in attempts.read_text().splitlines()]
    assert [(e["action"], e["outcome"]) for e in entries] == [
        ("launch", "accepted"),
        ("resume", "accepted"),
        ("exit", "exited"),
        ("resume", "refused"),
    ]
    assert "source.commit" in {d["field"] for d in entries[-1]["differences"]}
    # It ends with the experiment's report, written beside the binding
    # (tests/experiments/test_report.py).
    report = re.search(r"^   report: (\S+\.html)$", out, re.M)
    assert report is not None and Path(report.group(1)).parent == attempts.parent
    page = Path(report.group(1)).read_text()
    assert page.startswith("<!DOCTYPE html>")
    # No `report` extra in a plain install: the page says the plots were left out, and so does
    # the demo, with the command that adds them.
    assert 'id="plots-missing"' in page and "<img" not in page
    assert "   plots:  The plots were left out" in out and "automl-setup[report]" in out
    verified = run_cli("verify", "--python", str(workdir / "env-main"), "--json")
    assert verified.code == 0, verified.output
    assert json.loads(verified.stdout)["commit"] == main
