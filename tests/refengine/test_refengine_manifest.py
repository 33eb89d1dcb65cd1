"""Manifest validation of the reference engine, through `plan` (exit 2 = invalid input)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.refengine import EXAMPLE, engine, manifest_data, plan_json, write_manifest


def plan(tmp_path: Path, data: dict[str, Any], name: str = "m.yaml") -> Any:
    manifest = write_manifest(tmp_path / name, data)
    return engine("plan", "--manifest", manifest, "--workspace", tmp_path / "ws")


def test_example_manifest_is_valid_and_plans_eight_trials(tmp_path: Path) -> None:
    plan = plan_json(EXAMPLE, tmp_path / "ws")
    assert plan["experiment_id"] == "quadratic-demo"
    assert len(plan["trials"]) == 8
    assert not (tmp_path / "ws").exists()


def test_json_manifest_is_accepted(tmp_path: Path) -> None:
    result = plan(tmp_path, manifest_data(), name="m.json")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("where", "location"),
    [
        ((), "surprise"),
        (("search",), "search.surprise"),
        (("search", "budget"), "search.budget.surprise"),
        (("search", "objective"), "search.objective.surprise"),
        (("search", "parameters", "x"), "search.parameters.x.float.surprise"),
        (("workload",), "workload.surprise"),
        (("execution",), "execution.surprise"),
    ],
)
def test_unknown_keys_are_rejected_everywhere(
    tmp_path: Path, where: tuple[str, ...], location: str
) -> None:
    data = manifest_data()
    node = data
    for key in where:
        node = node[key]
    node["surprise"] = 1
    result = plan(tmp_path, data)
    assert result.returncode == 2
    assert f"{location}: unknown key" in result.stderr
    assert not (tmp_path / "ws").exists()


@pytest.mark.parametrize("bad_id", [".hidden", "-dash", "a/b", "x" * 65, "", "sp ace", "é"])
def test_unsafe_experiment_ids_are_rejected(tmp_path: Path, bad_id: str) -> None:
    data = manifest_data(experiment_id=bad_id)
    result = plan(tmp_path, data)
    assert result.returncode == 2
    assert "search.experiment_id" in result.stderr


@pytest.mark.parametrize("good_id", ["a", "A.b-c_d", "0" * 64, "_x"])
def test_safe_experiment_ids_are_accepted(tmp_path: Path, good_id: str) -> None:
    assert plan(tmp_path, manifest_data(experiment_id=good_id)).returncode == 0


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["workload"]["argv"].append("{trial_dri}"), "unknown placeholder {trial_dri}"),
        (lambda d: d["workload"].update(metrics_file="../m.json"), "metrics_file"),
        (lambda d: d["workload"].update(metrics_file="/tmp/m.json"), "metrics_file"),
        (lambda d: d["search"]["budget"].update(max_trials="4"), "max_trials"),
        (lambda d: d["search"]["budget"].update(max_trials=True), "max_trials"),
        (lambda d: d["search"]["budget"].update(trial_timeout_s=0), "trial_timeout_s"),
        (lambda d: d["search"].update(algorithm="bayes"), "algorithm"),
        (lambda d: d["search"]["objective"].update(direction="up"), "direction"),
        (lambda d: d["search"]["parameters"]["x"].update(low=2.0), "low must be below high"),
        (lambda d: d["search"]["parameters"]["x"].update(log=True), "log scale needs low > 0"),
        (lambda d: d["search"]["parameters"]["x"].update(grid_points=3), "only used by"),
        (lambda d: d["search"]["parameters"]["opt"].update(choices=["a", "a"]), "unique"),
        (lambda d: d["search"]["parameters"]["opt"].update(choices=[]), "choices"),
        (lambda d: d["search"].update(parameters={}), "parameters"),
        (lambda d: d["search"]["parameters"].update({"1x": d["search"]["parameters"]["x"]}), "1x"),
        (lambda d: d["execution"].update(pass_env=["NOT-A-NAME"]), "environment variable"),
        (lambda d: d["search"].update(algorithm="grid"), "needs grid_points"),
    ],
)
def test_invalid_values_are_rejected(tmp_path: Path, mutate: Any, message: str) -> None:
    data = manifest_data()
    mutate(data)
    result = plan(tmp_path, data)
    assert result.returncode == 2, result.stdout
    assert message in result.stderr


def test_duplicate_yaml_keys_are_rejected(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "m.yaml", manifest_data())
    text = manifest.read_text().replace("search:\n", "search:\n  seed: 1\n", 1)
    manifest.write_text(text)
    result = engine("plan", "--manifest", manifest, "--workspace", tmp_path / "ws")
    assert result.returncode == 2
    assert "duplicate key 'seed'" in result.stderr


def test_duplicate_json_keys_are_rejected(tmp_path: Path) -> None:
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps(manifest_data())[:-1] + ', "search": {}}')
    result = engine("plan", "--manifest", manifest, "--workspace", tmp_path / "ws")
    assert result.returncode == 2
    assert "duplicate key 'search'" in result.stderr


def test_missing_or_unparsable_manifest_is_invalid_input(tmp_path: Path) -> None:
    missing = engine("plan", "--manifest", tmp_path / "nope.yaml", "--workspace", tmp_path)
    assert missing.returncode == 2
    assert "cannot read manifest" in missing.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("search: [unclosed\n")
    result = engine("plan", "--manifest", broken, "--workspace", tmp_path, "--json")
    assert result.returncode == 2
    assert json.loads(result.stdout)["exit_code"] == 2
