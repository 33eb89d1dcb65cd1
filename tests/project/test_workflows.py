"""The GitHub workflows (.github/workflows/): actionlint and zizmor pass on them, as `.ci/run`
runs them, and they keep the release's least-privilege rules (docs/release.md)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO / ".github" / "workflows"
CI = WORKFLOWS / "ci.yml"
RELEASE = WORKFLOWS / "release.yml"
CHECK_PINS = REPO / ".github" / "check_pins.py"

# Exactly as `.ci/run` runs them (test_ci_run_lints_the_workflows_so keeps the two equal).
# actionlint runs shellcheck on every `run:` script only when it finds it: named explicitly.
ACTIONLINT_ARGS = ["-shellcheck", ".venv/bin/shellcheck", ".github/workflows/*.yml"]
ZIZMOR_ARGS = ["--offline", "--persona", "pedantic", "--strict-collection", ".github"]

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
    actions = [step["uses"].split("@")[0] for step in publish["steps"] if "uses" in step]
    assert actions == [
        "actions/download-artifact",
        "actions/attest-build-provenance",
        "actions/setup-python",
    ]
    assert publish["steps"][1]["with"] == {"subject-path": "dist/*"}
    # The one script: the pinned uv uploads by trusted publishing: no token, no password.
    (script,) = [step["run"] for step in publish["steps"] if "run" in step]
    assert script.strip().splitlines() == [
        "python -m pip install --disable-pip-version-check 'uv==0.13.9'",
        "uv publish --trusted-publishing always dist/*",
    ]
    # No caches anywhere in the release: the published files are the ones built above.
    text = RELEASE.read_text(encoding="utf-8")
    assert "actions/cache" not in text
    assert "cache:" not in text
    assert "secrets." not in text


# -- every pin checked against its action's repository (.github/check_pins.py, pins.json)


def check_pins_module() -> ModuleType:
    """The script .github/check_pins.py (not a package), imported to use its parsing."""
    spec = importlib.util.spec_from_file_location("check_pins", CHECK_PINS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_pins"] = module  # pydantic resolves the models' annotations through it
    spec.loader.exec_module(module)
    return module


check_pins = check_pins_module()


def test_every_pin_is_in_the_checked_list() -> None:
    used = check_pins.used_pins()
    assert {action for action, _, _ in used} >= {"actions/checkout", "actions/setup-python"}
    assert check_pins.compare(check_pins.load_list(), used) == []


# The commit release.yml named for setup-python v5.3.0 before issue 43: it exists nowhere.
INVENTED = "0b93645e9fea7318ecaed2b359559ac225c90093"
SETUP_PYTHON = "actions/setup-python@0b93645e9fea7318ecaed2b359559ac225c90a2b # v5.3.0"


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        ((SETUP_PYTHON, f"actions/setup-python@{INVENTED} # v5.3.0"), "is not in the checked list"),
        ((SETUP_PYTHON, SETUP_PYTHON.replace("v5.3.0", "v5.6.0")), "is not in the checked list"),
        (('python-version: "3.12"', 'python-version: "3.12"\n          cache: pip'), "['cache']"),
    ],
    ids=["commit", "release", "input"],
)
def test_a_pin_changed_without_checking_fails(
    tmp_path: Path, edit: tuple[str, str], named: str
) -> None:
    text = RELEASE.read_text(encoding="utf-8")
    assert edit[0] in text
    (tmp_path / "release.yml").write_text(text.replace(edit[0], edit[1], 1), encoding="utf-8")
    problems = check_pins.compare(check_pins.load_list(), check_pins.used_pins(tmp_path))
    assert any("actions/setup-python" in p and named in p for p in problems), problems


@pytest.mark.parametrize(
    "uses",
    [
        "actions/checkout@v4",
        "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683",
        "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4",
    ],
)
def test_a_pin_without_its_full_commit_and_release_is_refused(tmp_path: Path, uses: str) -> None:
    (tmp_path / "x.yml").write_text(
        f"on: push\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: {uses}\n",
        encoding="utf-8",
    )
    with pytest.raises(check_pins.PinError, match="is not `uses: OWNER/NAME@<40-hex commit>"):
        check_pins.used_pins(tmp_path)


def git(cwd: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=cwd, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return result.stdout.strip()


@pytest.fixture
def action_repository(tmp_path: Path) -> tuple[Path, str, str]:
    """A real action repository: action.yml with the input `who`, an annotated tag v1.0.0 on
    its first commit, then a second commit. Returns it, the tagged commit and the tag object."""
    repository = tmp_path / "hello"
    repository.mkdir()
    git(repository, "init", "--quiet")
    (repository / "action.yml").write_text(
        "name: hello\ninputs:\n  who:\n    description: whom\n"
        "runs:\n  using: composite\n  steps: []\n",
        encoding="utf-8",
    )
    git(repository, "add", "action.yml")
    git(repository, "commit", "--quiet", "-m", "one")
    git(repository, "tag", "-a", "v1.0.0", "-m", "v1.0.0")
    git(repository, "commit", "--quiet", "--allow-empty", "-m", "two")
    return (
        repository,
        git(repository, "rev-parse", "v1.0.0^{commit}"),
        git(repository, "rev-parse", "v1.0.0"),
    )


def run_check_pins(
    tmp_path: Path, repository: Path, uses: str, *options: str, given: str = "who"
) -> subprocess.CompletedProcess[str]:
    """.github/check_pins.py on a workflow of one step, `uses` given the input `given`."""
    workflows = tmp_path / "workflows"
    workflows.mkdir(exist_ok=True)
    (workflows / "w.yml").write_text(
        "on: push\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n"
        f"      - uses: {uses}\n        with:\n          {given}: me\n",
        encoding="utf-8",
    )
    return run(
        [
            sys.executable, str(CHECK_PINS),
            "--git-dir", f"example/hello={repository / '.git'}",
            "--workflows", str(workflows), "--pins", str(tmp_path / "pins.json"), *options,
        ]
    )  # fmt: skip


def test_check_pins_records_and_rechecks_against_the_repository(
    tmp_path: Path, action_repository: tuple[Path, str, str]
) -> None:
    repository, commit, _ = action_repository
    uses = f"example/hello@{commit} # v1.0.0"
    recorded = run_check_pins(tmp_path, repository, uses, "--record")
    assert recorded.returncode == 0, recorded.stderr
    (pin,) = check_pins.load_list(tmp_path / "pins.json").pins
    assert (pin.action, pin.tag, pin.commit, pin.inputs) == (
        "example/hello",
        "v1.0.0",
        commit,
        ("who",),
    )
    assert "github.com/example/hello" in pin.checked
    checked = run_check_pins(tmp_path, repository, uses)
    assert checked.returncode == 0, checked.stderr


def test_check_pins_fetches_the_tag_from_the_actions_repository(
    tmp_path: Path, action_repository: tuple[Path, str, str]
) -> None:
    """Without --git-dir it fetches the tag alone from https://github.com/OWNER/NAME.git: here
    git's own url.insteadOf sends that URL to a bare clone on disk (no network in the tests)."""
    repository, commit, _ = action_repository
    server = tmp_path / "server"
    git(
        tmp_path,
        "clone",
        "--quiet",
        "--bare",
        str(repository),
        str(server / "example" / "hello.git"),
    )
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    (workflows / "w.yml").write_text(
        "on: push\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n"
        f"      - uses: example/hello@{commit} # v1.0.0\n",
        encoding="utf-8",
    )
    redirect = {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": f"url.{server.as_uri()}/.insteadOf",
        "GIT_CONFIG_VALUE_0": "https://github.com/",
    }
    pins = tmp_path / "pins.json"
    command = [sys.executable, str(CHECK_PINS), "--workflows", str(workflows), "--pins", str(pins)]
    result = subprocess.run(
        [*command, "--record"],
        env={**os.environ, **redirect},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    (pin,) = check_pins.load_list(pins).pins
    assert pin.commit == commit
    assert pin.checked.startswith("git fetch https://github.com/example/hello.git refs/tags/v1.0.0")


@pytest.mark.parametrize("wrong", ["tag object", "other commit", "input"])
def test_check_pins_refuses_a_pin_its_repository_does_not_confirm(
    tmp_path: Path, action_repository: tuple[Path, str, str], wrong: str
) -> None:
    repository, commit, tag_object = action_repository
    assert (
        run_check_pins(
            tmp_path, repository, f"example/hello@{commit} # v1.0.0", "--record"
        ).returncode
        == 0
    )
    before = (tmp_path / "pins.json").read_bytes()
    head = git(repository, "rev-parse", "HEAD")
    uses, given, message = {
        "tag object": (f"example/hello@{tag_object} # v1.0.0", "who", f"v1.0.0 names {commit}"),
        "other commit": (f"example/hello@{head} # v1.0.0", "who", f"v1.0.0 names {commit}"),
        "input": (f"example/hello@{commit} # v1.0.0", "whom", "has no input ['whom']"),
    }[wrong]
    for options in ([], ["--record"]):
        result = run_check_pins(tmp_path, repository, uses, *options, given=given)
        assert result.returncode == 1, result.stdout + result.stderr
        assert message in result.stderr, result.stderr
        assert (tmp_path / "pins.json").read_bytes() == before


def test_the_release_docs_list_the_checked_pins() -> None:
    section = (REPO / "docs" / "release.md").read_text(encoding="utf-8")
    section = section.split("## The pinned actions and how to update them", 1)[1]
    row = r"^\| `([\w./-]+)` \| (v[\d.]+) \| `([0-9a-f]{40})` \| (\d{4}-\d{2}-\d{2}) \|$"
    documented = re.findall(row, section, re.M)
    listed = [
        (pin.action, pin.tag, pin.commit, pin.checked_on.isoformat())
        for pin in check_pins.load_list().pins
    ]
    assert sorted(documented) == sorted(listed)


def test_dependabot_keeps_the_actions_and_the_uv_lock_current() -> None:
    config = yaml.safe_load((REPO / ".github" / "dependabot.yml").read_text(encoding="utf-8"))
    assert config["version"] == 2
    updates = {update["package-ecosystem"]: update for update in config["updates"]}
    assert set(updates) == {"github-actions", "uv"}
    for update in updates.values():
        assert update["directory"] == "/"
        assert update["schedule"] == {"interval": "weekly"}
        assert update["cooldown"]["default-days"] >= 7


@pytest.mark.parametrize("damage", ["extra field", "no format version", "short commit"])
def test_a_checked_list_out_of_its_format_is_refused(tmp_path: Path, damage: str) -> None:
    listed = json.loads((REPO / ".github" / "pins.json").read_text(encoding="utf-8"))
    if damage == "extra field":
        listed["pins"][0]["trusted"] = True
    elif damage == "no format version":
        del listed["format_version"]
    else:
        listed["pins"][0]["commit"] = listed["pins"][0]["commit"][:12]
    path = tmp_path / "pins.json"
    path.write_text(json.dumps(listed), encoding="utf-8")
    with pytest.raises(check_pins.PinError, match="not a readable checked list"):
        check_pins.load_list(path)
