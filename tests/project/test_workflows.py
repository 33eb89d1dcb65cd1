"""The GitHub workflows (.github/workflows/): actionlint and zizmor pass on them, as `.ci/run`
runs them, and they keep the release's least-privilege rules (docs/release.md)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO / ".github" / "workflows"
CI = WORKFLOWS / "ci.yml"
RELEASE = WORKFLOWS / "release.yml"

# Exactly as `.ci/run` runs them (test_ci_run_lints_the_workflows_so keeps the two equal).
# actionlint runs shellcheck on every `run:` script only when it finds it: named explicitly.
ACTIONLINT_ARGS = ["-shellcheck", ".venv/bin/shellcheck", ".github/workflows/*.yml"]
ZIZMOR_ARGS = ["--offline", "--persona", "pedantic", "--strict-collection", ".github/workflows"]

SHA_PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")
USES_LINE = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<ref>\S+)(?P<comment>.*)$")


def tool(name: str) -> str:
    """The tool beside this Python (the venv's bin/), else on PATH; skipped when absent,
    failed in CI (CI=true), where the `test` extra must have installed it."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.is_file() else shutil.which(name)
    if found is None:
        message = f"{name} is not installed (the `test` extra brings it)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {message}", pytrace=False)
        pytest.skip(message)
    return found


def run(command: list[str], cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, check=False, timeout=120
    )


def load(path: Path) -> dict[str, Any]:
    workflow = yaml.safe_load(path.read_text(encoding="utf-8"))
    if True in workflow:  # YAML 1.1 reads the key `on` as the boolean true
        workflow["on"] = workflow.pop(True)
    return workflow


def triggers(workflow: dict[str, Any]) -> set[str]:
    on = workflow["on"]
    return {on} if isinstance(on, str) else set(on)


def steps(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    return [step for job in workflow["jobs"].values() for step in job.get("steps", [])]


def all_workflows() -> list[Path]:
    return sorted(WORKFLOWS.glob("*.yml")) + sorted(WORKFLOWS.glob("*.yaml"))


def test_both_workflows_exist() -> None:
    assert {path.name for path in all_workflows()} >= {"ci.yml", "release.yml"}


# -- the linters, as .ci/run runs them


def test_actionlint_passes_on_the_workflows() -> None:
    files = [str(path.relative_to(REPO)) for path in sorted(WORKFLOWS.glob("*.yml"))]
    result = run([tool("actionlint"), "-shellcheck", tool("shellcheck"), *files])
    assert result.returncode == 0, result.stdout + result.stderr


def test_zizmor_passes_on_the_workflows() -> None:
    result = run([tool("zizmor"), *ZIZMOR_ARGS])
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_linters_fail_on_a_finding(tmp_path: Path) -> None:
    """A workflow with the mistakes they exist for makes both exit non-zero (so does .ci/run)."""
    actionlint, zizmor = tool("actionlint"), tool("zizmor")
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text(
        "on: pull_request_target\n"
        "jobs:\n"
        "  x:\n"
        "    runs-on: ubuntu-latest\n"
        "    steps:\n"
        "      - uses: actions/checkout@v4\n"
        "      - run: echo ${{ github.event.pull_request.title }}\n"
        "      - run: echo ${{ github.nonsense.value }}\n",
        encoding="utf-8",
    )
    linted = run([actionlint, ".github/workflows/bad.yml"], cwd=tmp_path)
    assert linted.returncode != 0, linted.stdout + linted.stderr
    audited = run([zizmor, *ZIZMOR_ARGS], cwd=tmp_path)
    assert audited.returncode != 0, audited.stdout + audited.stderr
    for audit in ("template-injection", "unpinned-uses", "dangerous-triggers"):
        assert audit in audited.stdout, audited.stdout


def test_ci_run_lints_the_workflows_so() -> None:
    script = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    lint = script.split('echo "== lint"', 1)[1].split('echo "==', 1)[0]
    lines = lint.splitlines()
    assert ".venv/bin/actionlint " + " ".join(ACTIONLINT_ARGS) in lines
    assert ".venv/bin/zizmor " + " ".join(ZIZMOR_ARGS) in lines


# -- least privilege and pinning


def test_no_workflow_runs_on_pull_request_target() -> None:
    assert "pull_request_target" not in RELEASE.read_text(encoding="utf-8")
    for path in all_workflows():
        assert "pull_request_target" not in triggers(load(path)), path.name


@pytest.mark.parametrize("path", [CI, RELEASE], ids=lambda p: p.name)
def test_every_action_is_pinned_to_a_full_commit_with_its_version(path: Path) -> None:
    uses = [step["uses"] for step in steps(load(path)) if "uses" in step]
    assert uses, "no actions at all?"
    for ref in uses:
        assert SHA_PINNED.match(ref), f"{path.name}: {ref} is not pinned to a 40-hex commit"
    lines = [USES_LINE.match(line) for line in path.read_text(encoding="utf-8").splitlines()]
    found = [match for match in lines if match]
    assert [match["ref"] for match in found] == uses
    for match in found:
        comment = match["comment"].strip()
        assert re.fullmatch(r"# v\d+\.\d+\.\d+", comment), (
            f"{path.name}: {match['ref']} has no '# vX.Y.Z' comment (it has {comment!r})"
        )


@pytest.mark.parametrize("path", [CI, RELEASE], ids=lambda p: p.name)
def test_least_privilege(path: Path) -> None:
    workflow = load(path)
    assert workflow["permissions"] == {"contents": "read"}
    for name, job in workflow["jobs"].items():
        assert isinstance(job.get("timeout-minutes"), int), f"{name} has no timeout"
    for step in steps(workflow):
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] is False
        # Expressions reach scripts through env: never interpolated into `run:`.
        assert "${{" not in step.get("run", ""), step


def test_id_token_write_only_in_the_publish_job() -> None:
    for path in all_workflows():
        workflow = load(path)
        assert "id-token" not in (workflow.get("permissions") or {}), path.name
        for name, job in workflow["jobs"].items():
            if (path, name) != (RELEASE, "publish"):
                assert "id-token" not in (job.get("permissions") or {}), f"{path.name}: {name}"
    publish = load(RELEASE)["jobs"]["publish"]
    assert publish["permissions"] == {
        "id-token": "write",
        "attestations": "write",
        "contents": "read",
    }


def test_ci_runs_exactly_the_ci_script() -> None:
    workflow = load(CI)
    assert triggers(workflow) == {"push", "pull_request", "workflow_dispatch"}
    assert workflow["concurrency"]["cancel-in-progress"] is True
    (job,) = workflow["jobs"].values()
    assert job["runs-on"] == "ubuntu-latest"
    scripts = [step["run"].strip() for step in job["steps"] if "run" in step]
    assert [script for script in scripts if ".ci/run" in script] == [".ci/run"]
    assert scripts[-1] == ".ci/run"
    # Every check lives in .ci/run: the steps before it only set the machine up.
    for script in scripts[:-1]:
        for check in ("pytest", "ruff", "actionlint", "zizmor", "skills check"):
            assert check not in script, script


def test_release_builds_once_checks_and_publishes_by_trusted_publishing() -> None:
    workflow = load(RELEASE)
    assert triggers(workflow) == {"push"}
    assert workflow["on"]["push"] == {"tags": ["v*"]}
    build, publish = workflow["jobs"]["build"], workflow["jobs"]["publish"]
    scripts = "\n".join(step.get("run", "") for step in build["steps"])
    for needed in (
        "python -m build",
        "SOURCE_DATE_EPOCH",
        "twine check --strict dist/*",
        "check-wheel-contents dist/*.whl",
        'python .ci/release_check.py --tag "$TAG"',
    ):
        assert needed in scripts, needed
    assert publish["needs"] == "build"
    assert publish["environment"]["name"] == "pypi"
    assert "steps" in publish and not any("run" in step for step in publish["steps"])
    actions = [step["uses"].split("@")[0] for step in publish["steps"]]
    assert actions == [
        "actions/download-artifact",
        "actions/attest-build-provenance",
        "pypa/gh-action-pypi-publish",
    ]
    assert publish["steps"][1]["with"] == {"subject-path": "dist/*"}
    assert "with" not in publish["steps"][2], "trusted publishing: no token, no password"
    # No caches anywhere in the release: the published files are the ones built above.
    text = RELEASE.read_text(encoding="utf-8")
    assert "actions/cache" not in text
    assert "cache:" not in text
    assert "secrets." not in text
