"""`automl-setup report` on the demo experiment: the card equals the binding, the trials equal
the engine's ledger, the page is self-contained and deterministic, credentials never show,
refusals change nothing, without matplotlib the page is written with a note in place of the
plots, and headless Chromium really renders it."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import Client
from support.browser import assert_not_blank, headless_chrome
from support.cli import run_cli
from support.mcp import call_ok
from support.trees import tree_digest

from mcp_server import schemagen
from mcp_server.errors import SetupError
from mcp_server.experiments.attempts import log_attempt
from mcp_server.experiments.files import ExperimentFiles
from mcp_server.faces.mcp.server import server
from mcp_server.report.make import ReportResult, make_report
from mcp_server.requests import ReportQuery
from mcp_server.values import ExperimentId

EXP = "demo-quadratic"


@dataclass(frozen=True)
class Demo:
    root: Path
    stdout: str

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def sidecar(self) -> Path:
        return self.workspace / ".automl-setup" / EXP

    @property
    def printed_report(self) -> Path:
        found = re.search(r"^\s+report: (\S+\.html)$", self.stdout, re.M)
        assert found is not None, self.stdout
        return Path(found.group(1))

    def cli_report(self) -> Any:
        where = str(self.workspace)
        result = run_cli("report", "--experiment-id", EXP, "--workspace", where, "--json")
        assert result.code == 0, result.output
        return json.loads(result.stdout)

    def report(self, out: Path | None = None, workspace: Path | None = None) -> ReportResult:
        """The operation in process: the face adds nothing to what is checked here."""
        where = str(workspace or self.workspace)
        query = ReportQuery(experiment_id=EXP, workspace=where, out=str(out) if out else None)
        return make_report(query)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    """The demo, run once as a real process: it ends by writing the report."""
    root = tmp_path_factory.mktemp("report") / "demo"
    result = run_cli("demo", "--workdir", str(root))
    assert result.code == 0 and "DEMO OK" in result.stdout, result.output
    return Demo(root, result.stdout)


@pytest.fixture(scope="module")
def made(demo: Demo) -> ReportResult:
    """The report at its default place, made again in process (the demo made it first)."""
    return demo.report()


def _engine_ledger(demo: Demo) -> list[dict[str, Any]]:
    lines = (demo.workspace / EXP / "ledger.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


@pytest.mark.slow
def test_card_equals_the_binding_and_trials_the_ledger(demo: Demo) -> None:
    data = demo.cli_report()
    schema = json.loads((schemagen.SCHEMA_DIR / "experiment-report.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(data)
    binding = json.loads((demo.sidecar / "binding.json").read_text())
    engine, card = binding["engine"], data["card"]
    expected = {
        "repository": engine["source"]["repository"],
        "branch": engine["source"]["requested_ref"],
        "commit": engine["source"]["commit"],
        "subtree_id": engine["source"]["subtree_id"],
        "wheel_sha256": engine["build"]["wheel_sha256"],
        "record_digest": engine["build"]["record_digest"],
        "identity_digest": engine["identity_digest"],
        "platform": engine["environment"]["platform"],
        "watched": engine["environment"]["watched"],
        "dependencies": engine["environment"]["dependencies"],
        "manifest_sha256": binding["manifest_sha256"],
    }
    assert {name: card[name] for name in expected} == expected
    assert card["verifies_now"] is True and card["verification"] == []
    assert data["plots"] is True and data["plots_note"] is None
    assert card["checked_environment"] == str(demo.root / "env-main")

    ledger = _engine_ledger(demo)
    started = {e["index"] for e in ledger if e["event"] == "trial_started"}
    finished = [e for e in ledger if e["event"] == "trial_finished"]
    assert [t["index"] for t in data["trials"]] == sorted(started)
    assert len(data["trials"]) == len(finished) == 8
    values = {e["index"]: e["value"] for e in finished}
    params = {e["index"]: e["params"] for e in ledger if e["event"] == "trial_started"}
    assert {t["index"]: t["value"] for t in data["trials"]} == values
    assert {t["index"]: t["params"] for t in data["trials"]} == params
    assert max(t["attempts"] for t in data["trials"]) == 2  # the one SIGTERM interrupted
    best = min(finished, key=lambda e: e["value"])
    assert data["best"]["index"] == best["index"]

    attempts = (demo.sidecar / "attempts.jsonl").read_text().splitlines()
    assert [(e["action"], e["outcome"]) for e in data["timeline"]] == [
        (json.loads(line)["action"], json.loads(line)["outcome"]) for line in attempts
    ]
    refused = data["timeline"][-1]
    assert "source.commit: bound " in " ".join(refused["details"])

    page = Path(data["html_path"]).read_text()
    card_html = page[page.index('<section id="card">') : page.index("</section>")]
    for value in (*expected.values(), card["distribution"]):
        if isinstance(value, str):
            assert value in card_html
    assert page.count("<tr><td>") >= len(data["trials"]) + len(data["timeline"])


@pytest.mark.slow
def test_the_same_records_give_the_same_bytes(
    demo: Demo, made: ReportResult, tmp_path: Path
) -> None:
    # The demo's own report, made in its process, is the file a later call names again.
    printed, again = demo.printed_report, made
    assert Path(again.html_path) == printed and not again.written
    first, second = demo.report(tmp_path / "a.html"), demo.report(tmp_path / "b.html")
    assert first.written and second.written
    assert (tmp_path / "a.html").read_bytes() == (tmp_path / "b.html").read_bytes()
    assert (tmp_path / "a.html").read_bytes() == printed.read_bytes()
    assert first.html_sha256 == again.html_sha256 == second.html_sha256

    # Self-contained: no script, nothing fetched, every image inline.
    page = printed.read_text()
    assert "<script" not in page.lower()
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    sources = re.findall(r'\b(?:src|href)="([^"]*)"', page)
    assert sources and all(s.startswith("data:image/svg+xml;base64,") for s in sources)


@pytest.mark.slow
def test_credentials_never_reach_the_report(demo: Demo, tmp_path: Path) -> None:
    # A copy of the workspace whose ledger quotes a URL with a token, as a refusal may.
    workspace = tmp_path / "ws"
    shutil.copytree(demo.workspace, workspace)
    secret = "s3cr3t-t0ken"
    files = ExperimentFiles(workspace, ExperimentId(EXP))
    log_attempt(
        files,
        action="resume",
        outcome="refused",
        reason=f"fetch https://alice:{secret}@git.example/eng.git?access_token={secret} failed",
    )
    out = tmp_path / "copy.html"
    data = demo.report(out, workspace)
    assert secret not in data.model_dump_json() and secret not in out.read_text()
    assert "https://***@git.example/eng.git?access_token=***" in out.read_text()
    assert any("moved or copied from" in note for note in data.notes)


@pytest.mark.slow
def test_sft_outcomes_come_from_the_trials_metrics_files(
    demo: Demo, made: ReportResult, tmp_path: Path
) -> None:
    # The demo's quadratic trials have no SFT outcome; give trial 3 of a copy the metrics file
    # the `sft` workload writes (training/sft.py: every number also in the ledger, plus text).
    assert made.sft == {}
    workspace = tmp_path / "ws"
    shutil.copytree(demo.workspace, workspace)
    sha = "ab" * 32
    metrics = {"loss": 0.5, "score": 9, "score_before": 4, "questions": 16, "steps": 5,
               "rollbacks": 1, "loss_curve": [2.0, 1.0], "export_dir": "/x/export",
               "export_sha256": sha}  # fmt: skip
    (workspace / EXP / "trial-00003" / "metrics.json").write_text(json.dumps(metrics))
    out = tmp_path / "sft.html"
    data = demo.report(out, workspace)
    assert list(data.sft) == [3]
    assert (data.sft[3].score, data.sft[3].rollbacks, data.sft[3].export_sha256) == (9, 1, sha)
    page = out.read_text()
    assert '<table id="sft">' in page and "<td>9/16</td>" in page and sha in page


@pytest.mark.slow
def test_the_card_says_when_the_environment_no_longer_holds_the_build(
    demo: Demo, tmp_path: Path
) -> None:
    # A copy whose last accepted attempt ran in env-dev, which holds the dev/next build.
    workspace = tmp_path / "ws"
    shutil.copytree(demo.workspace, workspace)
    env_dev = str(demo.root / "env-dev")
    log_attempt(
        ExperimentFiles(workspace, ExperimentId(EXP)),
        action="resume",
        outcome="accepted",
        environment=env_dev,
    )
    card = demo.report(tmp_path / "dev.html", workspace).card
    assert card.checked_environment == env_dev and not card.verifies_now
    assert any(p.startswith("source.commit: bound ") for p in card.verification)
    assert '<span class="bad">no</span>' in (tmp_path / "dev.html").read_text()


def _refused(demo: Demo, out: Path) -> SetupError:
    with pytest.raises(SetupError) as refused:
        demo.report(out)
    return refused.value


@pytest.mark.slow
def test_refusals_name_the_cause_and_change_nothing(demo: Demo, tmp_path: Path) -> None:
    before = tree_digest(demo.root)
    unknown = run_cli("report", "--experiment-id", "no-such", "--workspace", str(demo.workspace))
    assert unknown.code == 3
    assert "no experiment 'no-such' launched by automl-setup" in unknown.stderr

    taken = tmp_path / "taken.html"
    taken.write_text("someone else's file")
    clash = _refused(demo, taken)
    assert clash.exit_code == 1 and "already exists and is not this report" in clash.cause
    assert taken.read_text() == "someone else's file"
    for out, cause in ((tmp_path / "missing" / "r.html", "does not exist"),
                       (tmp_path / "r.txt", "does not end in .html")):  # fmt: skip
        bad = _refused(demo, out)
        assert bad.exit_code == 2 and cause in bad.cause
        assert not out.exists()

    assert tree_digest(demo.root) == before


def _without_matplotlib(*args: str) -> subprocess.CompletedProcess[str]:
    """The command in a process where matplotlib cannot be imported (as without the extra)."""
    hidden = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from mcp_server.faces.cli.main import main\n"
        f"sys.exit(main({list(args)!r}))"
    )
    return subprocess.run(
        [sys.executable, "-c", hidden], capture_output=True, text=True, check=False
    )


INSTALL = "pip install 'automl-setup[report]'"


@pytest.mark.slow
def test_without_matplotlib_the_report_is_written_without_plots(
    demo: Demo, made: ReportResult, tmp_path: Path
) -> None:
    # With matplotlib: the plots are drawn and there is no note.
    assert made.plots is True and made.plots_note is None
    assert 'id="plots-missing"' not in Path(made.html_path).read_text()

    where = ["report", "--experiment-id", EXP, "--workspace", str(demo.workspace)]
    out = tmp_path / "plain.html"
    proc = _without_matplotlib(*where, "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    schema = json.loads((schemagen.SCHEMA_DIR / "experiment-report.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(data)
    assert data["plots"] is False and data["written"] is True
    note = data["plots_note"]
    assert INSTALL in note and "left out" in note and "uv tool install" in note

    # The page: everything but the plots, and the note loud where they would be.
    page = out.read_text()
    assert data["html_path"] == str(out)
    assert hashlib.sha256(out.read_bytes()).hexdigest() == data["html_sha256"]
    assert "<img" not in page and "data:image/svg+xml" not in page
    block = re.search(r'<p id="plots-missing"[^>]*>([^<]*)</p>', page)
    assert block is not None and block.group(1) == escape(note, quote=False)
    assert INSTALL in block.group(1)
    assert '<section id="card">' in page and '<table id="trials">' in page
    assert data["card"] == made.card.model_dump(mode="json")

    # The text says it too, and the same records give the same bytes.
    again = tmp_path / "plain-again.html"
    text = _without_matplotlib(*where, "--out", str(again))
    assert text.returncode == 0, text.stderr
    assert f"  plots:    {note}" in text.stdout.splitlines()
    assert again.read_bytes() == out.read_bytes()


@pytest.mark.slow
def test_the_mcp_tool_returns_the_same_report(demo: Demo, made: ReportResult) -> None:
    async def call() -> dict[str, Any]:
        args = {"experiment_id": EXP, "workspace": str(demo.workspace)}
        async with Client(server) as client:
            return await call_ok(client, "report_experiment", args)

    data = anyio.run(call)
    assert Path(data["html_path"]) == demo.printed_report
    assert data["card"] == made.card.model_dump()
    assert data["message"].startswith(f"report: {demo.printed_report} (unchanged)")


@pytest.mark.slow
def test_headless_chromium_renders_the_card_and_the_plots(demo: Demo, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    with headless_chrome() as driver:
        driver.get(demo.printed_report.as_uri())
        card = driver.find_element(By.ID, "card")
        assert card.is_displayed() and card.size["height"] > 200
        assert "yes: it holds exactly the bound build" in card.text
        for ident in ("history", "scatter"):
            plot = driver.find_element(By.ID, ident)
            width = driver.execute_script("return arguments[0].naturalWidth", plot)
            assert plot.is_displayed() and width > 300 and plot.size["height"] > 150
        rows = driver.find_elements(By.CSS_SELECTOR, "#trials tr")
        assert len(rows) == 1 + 8
        png = driver.get_screenshot_as_png()
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    (tmp_path / "report.png").write_bytes(png)
    assert_not_blank(png)
    assert errors == []
