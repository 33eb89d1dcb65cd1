"""verify and diagnose against real environments: a verified install, a tampered one, an empty
venv, an engine installed without automl-setup, and the look-alike `nvidia-tao-automl`."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import CliResult, profile_args, run_cli
from support.engines import engine_marker, make_venv, site_packages
from support.trees import env_snapshot

from mcp_server.environment.diagnose import Diagnosis
from mcp_server.environment.install import InstallResult
from mcp_server.operations import ProvenanceReport as VerifyReport  # what `verify --json` prints
from mcp_server.source.sourcerepo import REFERENCE_DISTRIBUTION, SourceRepository


def verify(repo: SourceRepository, env_dir: Path, *extra: str) -> CliResult:
    return run_cli("verify", "--python", str(env_dir), *profile_args(repo), *extra)


def diagnose(repo: SourceRepository, env_dir: Path, *extra: str) -> CliResult:
    return run_cli("diagnose", "--python", str(env_dir), *profile_args(repo), *extra)


def uv_build_wheel(source: Path, out: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "uv", "build", "--wheel", "--out-dir", str(out), str(source)],
        check=True,
        capture_output=True,
    )
    (wheel,) = out.glob("*.whl")
    return wheel


def uv_pip_install(env_dir: Path, wheel: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "uv", "pip", "install", "--python", str(env_dir), str(wheel)],
        check=True,
        capture_output=True,
    )


def fake_tao_automl_wheel(tmp_path: Path) -> Path:
    """A real, tiny distribution named nvidia-tao-automl (import tao_automl), built here."""
    src = tmp_path / "tao-app"
    (src / "src" / "tao_automl").mkdir(parents=True)
    (src / "src" / "tao_automl" / "__init__.py").write_text('"""Look-alike application."""\n')
    (src / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling>=1.25"]\nbuild-backend = "hatchling.build"\n\n'
        '[project]\nname = "nvidia-tao-automl"\nversion = "0.0.1"\n\n'
        '[tool.hatch.build.targets.wheel]\npackages = ["src/tao_automl"]\n'
    )
    return uv_build_wheel(src, tmp_path / "tao-dist")


def differing_fields(result: CliResult) -> list[str]:
    prefix = "  differs: "
    return [
        line[len(prefix) :].split(": recorded ", 1)[0]
        for line in result.stdout.splitlines()
        if line.startswith(prefix)
    ]


# --------------------------------------------------------------------------------------------
# verify


@pytest.mark.slow
@pytest.mark.shares_installed_env
def test_verify_passes_on_a_fresh_install(
    source_repo: SourceRepository, installed_env: Path
) -> None:
    before = env_snapshot(installed_env)
    text = verify(source_repo, installed_env)
    assert text.code == 0, text.output
    assert text.stdout.startswith(f"verified: {REFERENCE_DISTRIBUTION} in {installed_env}")
    assert f"commit: {source_repo.head('main')} (refs/heads/main)" in text.stdout
    assert "identity digest recomputes" in text.stdout

    report = VerifyReport.model_validate_json(verify(source_repo, installed_env, "--json").stdout)
    assert report.status == "verified"
    assert report.commit == source_repo.head("main")
    assert report.requested_ref == "refs/heads/main"
    assert report.version == "0.1.0"
    assert report.files_checked >= 10
    assert report.differences == []
    assert report.identity_digest and len(report.identity_digest) == 64
    assert env_snapshot(installed_env) == before  # verify only reads


@pytest.mark.slow
def test_verify_reports_every_difference(
    source_repo: SourceRepository, installed_env: Path
) -> None:
    site = site_packages(installed_env)
    (dist_info,) = site.glob("automl_refengine-*.dist-info")
    record_path = installed_env / ".automl-setup" / "engine-record.json"
    expected: list[str] = []

    def check() -> VerifyReport:
        result = verify(source_repo, installed_env)
        assert result.code == 1, result.output
        assert result.stdout.startswith("mismatch:")
        assert sorted(differing_fields(result)) == sorted(expected)
        report = VerifyReport.model_validate_json(
            verify(source_repo, installed_env, "--json").stdout
        )
        assert report.status == "mismatch"
        assert sorted(d.field for d in report.differences) == sorted(expected)
        return report

    # 1. An installed file edited.
    search = site / "automl_refengine" / "search.py"
    search.write_text(search.read_text() + "\n# edited after install\n")
    expected.append("file automl_refengine/search.py")
    report = check()
    (diff,) = report.differences
    assert diff.recorded.startswith("sha256=") and diff.found.startswith("sha256=")
    assert diff.recorded != diff.found

    # 2. An installed file deleted.
    (site / "automl_refengine" / "report.py").unlink()
    expected.append("file automl_refengine/report.py")
    report = check()
    assert {d.field: d.found for d in report.differences}["file automl_refengine/report.py"] == (
        "missing"
    )

    # 3. direct_url.json names another commit (its RECORD hash no longer matches either).
    direct_url = dist_info / "direct_url.json"
    data = json.loads(direct_url.read_text())
    data["vcs_info"]["commit_id"] = "f" * 40
    direct_url.write_text(json.dumps(data))
    expected += ["source.commit", f"file {dist_info.name}/direct_url.json"]
    report = check()
    commit_diff = {d.field: d for d in report.differences}["source.commit"]
    assert (commit_diff.recorded, commit_diff.found) == (source_repo.head("main"), "f" * 40)

    # 4. The record's commit edited: the identity digest no longer recomputes.
    record = json.loads(record_path.read_text())
    record["source"]["commit"] = "e" * 40
    record_path.write_text(json.dumps(record, indent=2))
    expected.append("identity_digest")
    report = check()
    by_field = {d.field: d for d in report.differences}
    assert (by_field["source.commit"].recorded, by_field["source.commit"].found) == (
        "e" * 40,
        "f" * 40,
    )
    assert by_field["identity_digest"].recorded != by_field["identity_digest"].found

    # diagnose says the same, and points at reinstalling.
    diag = diagnose(source_repo, installed_env)
    assert diag.code == 1
    assert "engine status: mismatch" in diag.stdout
    assert "modified after install or does not match its record" in diag.stdout
    for field in expected:
        assert f"- {field}: recorded" in diag.stdout


@pytest.mark.slow
def test_verify_and_diagnose_with_no_engine(source_repo: SourceRepository, tmp_path: Path) -> None:
    env_dir = make_venv(tmp_path / "empty")
    before = env_snapshot(env_dir)
    result = verify(source_repo, env_dir)
    assert result.code == 3, result.output
    assert result.stdout.startswith(f"no-engine: {REFERENCE_DISTRIBUTION}")
    assert f"{REFERENCE_DISTRIBUTION} is not installed in {env_dir}" in result.stdout
    assert "install the core from source with one of:" in result.stdout
    report = VerifyReport.model_validate_json(verify(source_repo, env_dir, "--json").stdout)
    assert (report.status, report.commit) == ("no-engine", None)

    diag = diagnose(source_repo, env_dir, "--json")
    assert diag.code == 1
    parsed = Diagnosis.model_validate_json(diag.stdout)
    assert parsed.record_status == "no-engine"
    assert parsed.engine.version is None
    assert parsed.engine.importable is False
    # One line per fact: that it is missing, once.
    assert [f for f in parsed.findings if "not installed" in f] == [
        f"{REFERENCE_DISTRIBUTION} is not installed in {env_dir}"
    ]
    assert env_snapshot(env_dir) == before  # nothing created, not even the state dir


@pytest.mark.slow
def test_engine_without_record_and_the_tao_lookalike(
    source_repo: SourceRepository, tmp_path: Path
) -> None:
    env_dir = make_venv(tmp_path / "by-hand")
    # The engine installed by hand: built with `uv build`, installed with `uv pip install`.
    engine_wheel = uv_build_wheel(source_repo.work / source_repo.subdirectory, tmp_path / "dist")
    uv_pip_install(env_dir, engine_wheel)
    assert engine_marker(env_dir) == "dev-next-1"  # the work tree was last on dev/next

    result = verify(source_repo, env_dir)
    assert result.code == 3, result.output
    assert result.stdout.startswith("no-record:")
    assert "installed without an automl-setup record (installer: uv)" in result.stdout
    assert "its source is unproven" in result.stdout

    diag = diagnose(source_repo, env_dir)
    assert diag.code == 1
    assert "engine status: no-record" in diag.stdout
    assert "without an automl-setup record" in diag.stdout
    assert "tao_automl" not in diag.stdout  # the look-alike is named only when it is there

    # Now the separately published application is "installed" too (a real tiny wheel).
    uv_pip_install(env_dir, fake_tao_automl_wheel(tmp_path))
    diag = diagnose(source_repo, env_dir)
    assert diag.code == 1
    assert (
        "nvidia-tao-automl 0.0.1 is installed (import tao_automl): that is the separately "
        f"published application, not the core {REFERENCE_DISTRIBUTION}"
    ) in diag.stdout
    parsed = Diagnosis.model_validate_json(diagnose(source_repo, env_dir, "--json").stdout)
    (tao,) = parsed.confusables
    assert (tao.distribution, tao.import_name, tao.version, tao.importable) == (
        "nvidia-tao-automl",
        "tao_automl",
        "0.0.1",
        True,
    )
    assert parsed.engine.version == "0.1.0"


@pytest.mark.slow
def test_diagnose_install_commands_work(source_repo: SourceRepository, tmp_path: Path) -> None:
    """The commands diagnose prints are real: the main one, run as printed, installs main."""
    env_dir = make_venv(tmp_path / "target")
    diag = diagnose(source_repo, env_dir, "--json")
    parsed = Diagnosis.model_validate_json(diag.stdout)
    assert set(parsed.install_commands) == {"main", "development branch"}
    text = diagnose(source_repo, env_dir).stdout
    for command in parsed.install_commands.values():
        assert command in text
    dev = shlex.split(parsed.install_commands["development branch"])
    assert dev[:4] == ["automl-setup", "install", "--branch", "<dev-branch>"]

    main = shlex.split(parsed.install_commands["main"])
    assert main[:6] == ["automl-setup", "install", "--branch", "main", "--python", str(env_dir)]
    assert ["--repository", source_repo.url] == main[6:8]
    result = run_cli(*main[1:], "--json")
    done = InstallResult.model_validate_json(result.stdout)
    assert done.record.source.commit == source_repo.head("main")
    assert engine_marker(env_dir) == "main-1"
    assert verify(source_repo, env_dir).code == 0

    healthy = diagnose(source_repo, env_dir)
    assert healthy.code == 0, healthy.output
    assert "engine status: verified" in healthy.stdout


@pytest.mark.slow
def test_json_outputs_parse_with_the_documented_fields(
    source_repo: SourceRepository, installed_env: Path
) -> None:
    resolve = run_cli("resolve", "--branch", "dev/next", "--json", *profile_args(source_repo))
    assert json.loads(resolve.stdout) == {
        "repository": source_repo.url,
        "branch": "dev/next",
        "ref": "refs/heads/dev/next",
        "commit": source_repo.head("dev/next"),
        "profile_source": {
            "distribution": REFERENCE_DISTRIBUTION,
            "repository": source_repo.url,
            "subdirectory": source_repo.subdirectory,
            "requirement": "==0.1.0",
            "source": "repository, subdirectory, distribution given, over built-in default",
        },
    }
    result = run_cli(
        "install",
        "--branch",
        "dev/next",
        "--python",
        str(installed_env),
        "--json",
        *profile_args(source_repo),
    )
    assert result.code == 0, result.output
    assert result.stderr == ""  # --json: no progress lines, stdout is one JSON object
    done = InstallResult.model_validate_json(result.stdout)
    assert done.status == "installed"
    assert done.previous_commit == source_repo.head("main")
    assert done.verify.status == "verified"
    rec = done.record
    assert rec.source.repository == source_repo.url
    assert rec.source.subdirectory == source_repo.subdirectory
    assert rec.build.distribution == REFERENCE_DISTRIBUTION
    assert rec.install.environment == str(installed_env)
    assert rec.install.installer == "uv"
    stored = json.loads((installed_env / ".automl-setup" / "engine-record.json").read_text())
    assert stored == json.loads(rec.model_dump_json())

    history = json.loads(run_cli("history", "--python", str(installed_env), "--json").stdout)
    assert set(history) == {"environment", "entries", "torn_line"}
    assert history["entries"][-1]["identity_digest"] == rec.identity_digest
    assert history["entries"][-1]["wheel_sha256"] == rec.build.wheel_sha256

    repair = json.loads(run_cli("repair", "--python", str(installed_env), "--json").stdout)
    assert repair == {
        "environment": str(installed_env),
        "done": f"nothing to repair in {installed_env}",
    }

    diag = Diagnosis.model_validate_json(diagnose(source_repo, installed_env, "--json").stdout)
    assert diag.record_status == "verified"
    assert diag.environment == str(installed_env)
