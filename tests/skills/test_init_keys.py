"""`init` owns keys, not entries (issue 43): a key someone adds inside an entry init owns is
theirs across init, upgrades and --launcher changes and no edit for --check; a key init wrote,
changed by hand, is still an edit and refused with nothing changed. `--index` (or the project
file's `index`) goes into the uvx entry, never with a login. The 0.1.0 record (one digest per
entry) is read and carried forward; a newer one is refused by name."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.cli import run_cli
from support.projects import user_project
from support.trees import snapshot

from mcp_server.bundle.ownership import RECORD_PATH
from mcp_server.bundle.tomledit import get_table, set_table

INDEX = "https://pypi.example.com/simple/"
RELEASE_1 = Path(__file__).parents[1] / "fixtures" / "formats" / "release-1" / "init-project"
CODEX_KEY = ("mcp_servers", "automl-setup")


def _claude(project: Path) -> dict:
    return json.loads((project / ".mcp.json").read_text())["mcpServers"]["automl-setup"]


def _codex(project: Path) -> dict:
    entry = get_table((project / ".codex/config.toml").read_text(), CODEX_KEY)
    assert entry is not None
    return entry


def _edit_claude(project: Path, **keys: object) -> None:
    """A user's hand edit of the Claude Code entry (their editor rewrites the file)."""
    data = json.loads((project / ".mcp.json").read_text())
    data["mcpServers"]["automl-setup"].update(keys)
    (project / ".mcp.json").write_text(json.dumps(data, indent=2) + "\n")


def _edit_codex(project: Path, **keys: object) -> None:
    path = project / ".codex/config.toml"
    path.write_text(set_table(path.read_text(), CODEX_KEY, {**_codex(project), **keys}))


def test_keys_someone_adds_are_theirs_and_a_key_init_wrote_stays_owned(tmp_path: Path) -> None:
    project = user_project(tmp_path / "proj")
    assert run_cli("init", "--project", str(project)).code == 0
    _edit_claude(project, env={"HF_HOME": "/data/hf"}, timeout=60000)
    _edit_codex(project, env={"HF_HOME": "/data/hf"}, env_vars=["WANDB_API_KEY"], enabled=True)
    theirs = {"env": {"HF_HOME": "/data/hf"}, "timeout": 60000}
    theirs_codex = {"env": {"HF_HOME": "/data/hf"}, "env_vars": ["WANDB_API_KEY"], "enabled": True}

    check = run_cli("init", "--check", "--project", str(project))
    assert check.code == 0, check.output  # their keys are no edit
    before = snapshot(project)
    again = run_cli("init", "--project", str(project))
    assert again.code == 0 and snapshot(project) == before, again.output  # nothing to write

    # A launcher change and the index: init rewrites its own keys, theirs stay as they are.
    moved = run_cli("init", "--project", str(project), "--launcher", "uvx", "--index", INDEX)
    assert moved.code == 0, moved.output
    claude, codex = _claude(project), _codex(project)
    assert claude["command"] == "uvx" and claude["args"][:2] == ["--index", f"automl-setup={INDEX}"]
    assert {k: claude[k] for k in theirs} == theirs
    assert {k: codex[k] for k in ("env", "enabled")} == {
        k: theirs_codex[k] for k in ("env", "enabled")
    }
    assert codex["env_vars"] == [
        "WANDB_API_KEY",
        "UV_INDEX_AUTOML_SETUP_USERNAME",
        "UV_INDEX_AUTOML_SETUP_PASSWORD",
        "UV_KEYRING_PROVIDER",
    ]
    assert run_cli("init", "--check", "--project", str(project)).code == 0
    # Back to the path launcher: init takes out the names it added, theirs stays.
    back = run_cli("init", "--project", str(project))
    assert back.code == 0, back.output
    assert (
        _codex(project)["env_vars"] == ["WANDB_API_KEY"]
        and _claude(project)["env"] == theirs["env"]
    )

    # A key init wrote, changed by hand: an edit, for --check and for init (nothing written).
    _edit_claude(project, args=["--debug"])
    before = snapshot(project)
    check = run_cli("init", "--check", "--project", str(project))
    assert check.code == 1 and "changed since init wrote it" in check.output, check.output
    assert "args" in check.output
    refused = run_cli("init", "--project", str(project))
    assert refused.code == 1 and "nothing was written" in refused.output, refused.output
    assert snapshot(project) == before


def test_the_index_goes_into_the_uvx_entry_and_a_login_in_it_is_refused(tmp_path: Path) -> None:
    project = user_project(tmp_path / "proj")
    before = snapshot(project)
    for argv, cause in [
        (
            ["--launcher", "uvx", "--index", "https://alice:s3cret@pypi.example.com/simple/"],
            "login",
        ),
        (["--launcher", "uvx", "--index", "ftp://pypi.example.com/"], "not an http(s) URL"),
        (["--index", INDEX], "add --launcher uvx"),
    ]:
        refused = run_cli("init", "--project", str(project), *argv)
        assert refused.code == 2 and cause in refused.output, refused.output
        assert "s3cret" not in refused.output  # the password is never repeated
        assert snapshot(project) == before
    login = run_cli("init", "--project", str(project), "--launcher", "uvx", "--index",
                    "https://alice:s3cret@pypi.example.com/simple/")  # fmt: skip
    assert "UV_INDEX_AUTOML_SETUP_USERNAME" in login.output and "netrc" in login.output

    # The project file's index, when --index is not given; its login refused alike.
    (project / "automl-setup.toml").write_text(f'index = "{INDEX}"\n')
    done = run_cli("init", "--project", str(project), "--launcher", "uvx")
    assert done.code == 0, done.output
    assert _codex(project)["args"][:2] == ["--index", f"automl-setup={INDEX}"]
    assert run_cli("init", "--check", "--project", str(project)).code == 0
    (project / "automl-setup.toml").write_text('index = "https://u:p@pypi.example.com/"\n')
    before = snapshot(project)
    refused = run_cli("init", "--project", str(project), "--launcher", "uvx")
    assert refused.code == 2 and "automl-setup.toml index" in refused.output, refused.output
    assert snapshot(project) == before


def _released_project(tmp_path: Path) -> Path:
    """A project as automl-setup 0.1.0 left it (its own init run: tests/fixtures/formats)."""
    project = user_project(tmp_path / "proj")
    shutil.copytree(RELEASE_1, project, dirs_exist_ok=True)
    return project


def test_the_record_of_0_1_0_is_carried_forward_keeping_keys_someone_added(
    tmp_path: Path,
) -> None:
    project = _released_project(tmp_path)
    assert json.loads((project / RECORD_PATH).read_text())["schema_version"] == 1
    _edit_claude(project, env={"HF_HOME": "/data/hf"})  # added under 0.1.0: theirs
    _edit_codex(project, enabled=True)
    done = run_cli("init", "--project", str(project))
    assert done.code == 0, done.output
    assert _claude(project)["env"] == {"HF_HOME": "/data/hf"} and _codex(project)["enabled"]
    record = json.loads((project / RECORD_PATH).read_text())
    assert record["schema_version"] == 2
    claude = next(i for i in record["items"] if i["path"] == ".mcp.json")
    assert sorted(k["key"] for k in claude["keys"]) == [["args"], ["command"], ["type"]]
    assert run_cli("init", "--check", "--project", str(project)).code == 0


def test_a_key_0_1_0_wrote_and_someone_changed_is_refused(tmp_path: Path) -> None:
    project = _released_project(tmp_path)
    _edit_codex(project, tool_timeout_sec=60)
    before = snapshot(project)
    refused = run_cli("init", "--project", str(project))
    assert refused.code == 1 and "nothing was written" in refused.output, refused.output
    assert ".codex/config.toml mcp_servers.automl-setup" in refused.output
    assert snapshot(project) == before  # the 0.1.0 record too: never rewritten on a refusal


def test_a_record_of_a_newer_format_is_refused_by_name(tmp_path: Path) -> None:
    project = _released_project(tmp_path)
    record = json.loads((project / RECORD_PATH).read_text())
    (project / RECORD_PATH).write_text(
        json.dumps({**record, "schema_version": 3, "tool_version": "9.0.0"})
    )
    before = snapshot(project)
    for argv in (["init"], ["init", "--check"]):
        refused = run_cli(*argv, "--project", str(project))
        assert refused.code != 0 and "written in format 3 by automl-setup 9.0.0" in refused.output
        assert snapshot(project) == before


@pytest.mark.parametrize("where", ["pyproject", "dedicated"])
def test_the_project_file_index_must_be_text(tmp_path: Path, where: str) -> None:
    project = user_project(tmp_path / "proj")
    if where == "pyproject":
        with (project / "pyproject.toml").open("a") as f:
            f.write("\n[tool.automl-setup]\nindex = 3\n")
    else:
        (project / "automl-setup.toml").write_text("index = 3\n")
    before = snapshot(project)
    refused = run_cli("init", "--project", str(project), "--launcher", "uvx")
    assert refused.code == 2 and "index must be a URL" in refused.output, refused.output
    assert snapshot(project) == before


def test_an_older_pin_from_an_index_is_named_stale_with_the_index_in_its_remedy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The remedy of a stale uvx entry keeps its index: `init --launcher uvx` alone would
    write the entry without it."""
    from mcp_server import __version__
    from mcp_server.bundle import targets
    from mcp_server.bundle.init import InitRequest, run_init

    project = user_project(tmp_path / "proj")
    monkeypatch.setattr(targets, "__version__", "0.0.9")  # an older automl-setup ran init
    run_init(InitRequest(project=project, launcher="uvx", index=INDEX))
    assert _claude(project)["args"] == [
        "--index", f"automl-setup={INDEX}", "--from", "automl-setup==0.0.9", "automl-setup-mcp",
    ]  # fmt: skip
    monkeypatch.setattr(targets, "__version__", __version__)
    stale = run_init(InitRequest(project=project, check=True))
    details = [i.detail for i in stale.items if i.key]
    assert not stale.ok and len(details) == 2
    for detail in details:
        assert f"`automl-setup init --launcher uvx --index {INDEX}` pins it to" in detail, detail
