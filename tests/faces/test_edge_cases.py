"""Edge cases a demanding user ran into: each refusal says what to do and changes nothing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from support.cli import profile_args, run_cli
from support.experiments import manifest_data, write_manifest
from support.trees import env_snapshot

from mcp_server.children.uv import uv_binary
from mcp_server.source.sourcerepo import REFERENCE_DISTRIBUTION, SourceRepository

pytestmark = pytest.mark.slow


def test_an_installed_commit_outside_the_requirement_is_not_unchanged(
    source_repo: SourceRepository, installed_env: Path
) -> None:
    before = env_snapshot(installed_env)
    result = run_cli(
        "install", "--branch", "main", "--python", str(installed_env),
        *profile_args(source_repo), "--requirement", "==9.9",
    )  # fmt: skip
    assert result.code == 1, result.output
    assert "check:" in result.stderr and "does not satisfy the requirement '==9.9'" in result.stderr
    assert "unchanged" not in result.output
    assert env_snapshot(installed_env) == before


def test_a_launch_the_engine_rejected_neither_binds_the_env_nor_burns_the_id(
    tmp_path: Path, source_repo: SourceRepository, installed_env: Path
) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump({"search": {"experiment_id": "rejected"}}))
    workspace = tmp_path / "ws"
    before = env_snapshot(installed_env)
    first = run_cli("launch", "--manifest", str(broken), "--workspace", str(workspace),
                    "--python", str(installed_env))  # fmt: skip
    assert first.code == 2, first.output  # the engine's `plan` rejects it as invalid input
    assert "automl-refengine plan` rejects" in first.stderr and "workload" in first.stderr
    assert not workspace.exists()  # no sidecar, binding or ledger: the id is still free
    assert env_snapshot(installed_env) == before  # and no registry entry

    fixed = write_manifest(tmp_path / "fixed.yaml", experiment_id="rejected", max_trials=1)
    again = run_cli("launch", "--manifest", str(fixed), "--workspace", str(workspace),
                    "--python", str(installed_env))  # fmt: skip
    assert again.code == 0, again.output

    # Nothing the engine could lose is bound to this environment: a new engine may go in.
    swap = run_cli("install", "--branch", "dev/next", "--python", str(installed_env),
                   *profile_args(source_repo))  # fmt: skip
    assert swap.code == 0, swap.output


def test_diagnose_and_verify_name_the_recorded_engine_after_it_was_uninstalled(
    tmp_path: Path, source_repo: SourceRepository, installed_env: Path
) -> None:
    record = json.loads((installed_env / ".automl-setup" / "engine-record.json").read_text())
    subprocess.run(
        [uv_binary(), "pip", "uninstall", "--python", str(installed_env / "bin" / "python"),
         REFERENCE_DISTRIBUTION],
        capture_output=True, check=True,
    )  # fmt: skip
    verify = run_cli("verify", "--python", str(installed_env), "--json")
    assert verify.code == 3
    report = json.loads(verify.stdout)
    assert report["status"] == "no-engine"
    assert report["commit"] == record["source"]["commit"]

    diagnosis = run_cli("diagnose", "--python", str(installed_env), "--json")
    data = json.loads(diagnosis.stdout)
    assert data["engine"]["distribution"] == REFERENCE_DISTRIBUTION
    assert data["engine"]["import_name"] is None  # not the NVIDIA core: no guessed import name
    recorded = data["install_commands"]["recorded commit"]
    assert f"--commit {record['source']['commit']}" in recorded
    assert source_repo.url in recorded and f"--distribution {REFERENCE_DISTRIBUTION}" in recorded
    assert "nvidia-automl-core" not in json.dumps(data["install_commands"])


def test_a_wheel_that_refuses_the_target_python_is_refused_at_check(
    tmp_path: Path, source_repo: SourceRepository, installed_env: Path
) -> None:
    pyproject = (source_repo.work / source_repo.subdirectory / "pyproject.toml").read_text()
    source_repo.commit_engine(
        "dev/py99",
        base="main",
        marker="py99",
        files={
            f"{source_repo.subdirectory}/pyproject.toml": pyproject.replace(
                'requires-python = ">=3.10"', 'requires-python = ">=3.99"'
            )
        },
    )
    before = env_snapshot(installed_env)
    result = run_cli("install", "--branch", "dev/py99", "--python", str(installed_env),
                     *profile_args(source_repo))  # fmt: skip
    assert result.code == 1, result.output
    assert "check:" in result.stderr and "requires Python >=3.99" in result.stderr
    assert env_snapshot(installed_env) == before


def test_a_failed_install_removes_every_folder_create_env_made(
    tmp_path: Path, source_repo: SourceRepository
) -> None:
    target = tmp_path / "a" / "b" / "env"
    result = run_cli("install", "--branch", "no-such-branch", "--python", str(target),
                     "--create-env", *profile_args(source_repo))  # fmt: skip
    assert result.code == 1 and "resolve:" in result.stderr
    assert not (tmp_path / "a").exists()


def test_experiments_lists_the_readable_ones_and_names_the_damaged_one(
    tmp_path: Path, installed_env: Path
) -> None:
    workspace = tmp_path / "ws"
    for name in ("good", "damaged"):
        manifest = write_manifest(tmp_path / f"{name}.yaml", experiment_id=name, max_trials=1,
                                  sleep=0.0)  # fmt: skip
        launched = run_cli("launch", "--manifest", str(manifest), "--workspace", str(workspace),
                           "--python", str(installed_env))  # fmt: skip
        assert launched.code == 0, launched.output
    binding = workspace / ".automl-setup" / "damaged" / "binding.json"
    binding.write_bytes(binding.read_bytes()[:40])
    listing = run_cli("experiments", "--workspace", str(workspace), "--json")
    assert listing.code == 1
    data = json.loads(listing.stdout)
    assert [e["experiment_id"] for e in data["experiments"]] == ["good"]
    assert len(data["unreadable"]) == 1 and data["unreadable"][0].startswith("damaged:")


def test_usage_errors_with_json_print_one_json_error(tmp_path: Path) -> None:
    result = run_cli("verify", "--json", "--bogus")
    assert result.code == 2
    error = json.loads(result.stdout)["error"]
    assert error["step"] == "parse arguments" and "--bogus" in error["cause"]


def test_the_demo_refuses_a_workdir_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "kept.txt").write_text("mine")
    result = run_cli("demo", "--workdir", str(tmp_path))
    assert result.code == 1 and "not empty" in result.output
    assert [p.name for p in tmp_path.iterdir()] == ["kept.txt"]


@pytest.mark.shares_installed_env
def test_manifest_without_a_string_experiment_id_is_invalid_input(
    tmp_path: Path, installed_env: Path
) -> None:
    data = manifest_data()
    data["search"]["experiment_id"] = 5
    manifest = tmp_path / "int-id.yaml"
    manifest.write_text(yaml.safe_dump(data))
    result = run_cli("launch", "--manifest", str(manifest), "--workspace", str(tmp_path / "ws"),
                     "--python", str(installed_env))  # fmt: skip
    assert result.code == 2 and "string search.experiment_id" in result.stderr
    assert not (tmp_path / "ws").exists()
