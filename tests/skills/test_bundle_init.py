"""`automl-setup init` in a user's project, in process and through the command line: what it
writes, the merges that keep every other byte, ownership (re-run, upgrade, edits refused with
nothing changed), and the pure editors under it."""

from __future__ import annotations

import dataclasses
import difflib
import json
import subprocess
import zipfile
from pathlib import Path

import pytest
from support.cli import REPO_ROOT, run_cli
from support.engines import WheelInstall
from support.projects import CODEX_CONFIG, MCP_JSON, user_project
from support.release import project_version
from support.trees import snapshot, tree_digest

from mcp_server.bundle import init as init_module
from mcp_server.bundle.contents import PACKAGE_DATA, Bundle, BundledFile, read_bundle
from mcp_server.bundle.init import InitRequest, run_init
from mcp_server.bundle.jsonedit import JsonEditError, set_member
from mcp_server.bundle.ownership import RECORD_PATH, State, judge
from mcp_server.bundle.tomledit import TomlEditError, get_table, set_table
from mcp_server.errors import SetupError
from mcp_server.skills.sync import manifest

SERVER = {"type": "stdio", "command": "/opt/x/bin/automl-setup-mcp", "args": [], "env": {}}


# --- the pure editors ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "{}",
        '{\n  "mcpServers": {}\n}\n',
        MCP_JSON,
        '{"mcpServers": {"other": {"command": "x"}}}',
        '{\n\t"mcpServers": {\n\t\t"automl-setup": {"command": "old"}\n\t}\n}\n',
    ],
)
def test_a_json_member_is_set_keeping_every_other_byte(text: str) -> None:
    new = set_member(text, ("mcpServers", "automl-setup"), SERVER)
    data = json.loads(new)
    assert data["mcpServers"]["automl-setup"] == SERVER
    before = json.loads(text)
    before.setdefault("mcpServers", {}).pop("automl-setup", None)
    data["mcpServers"].pop("automl-setup")
    assert data == before
    if "automl-setup" not in text:  # an insertion: the old text is all still there, in order
        kept = iter(new)
        assert all(char in kept for char in text.replace("}", "").replace("{", ""))
    assert set_member(new, ("mcpServers", "automl-setup"), SERVER) == new  # idempotent


def test_json_that_cannot_be_merged_is_refused() -> None:
    for bad in ("[1]", "{", '{"mcpServers": 3}', '{"a": 1, "a": 2}'):
        with pytest.raises(JsonEditError):
            set_member(bad, ("mcpServers", "automl-setup"), SERVER)


def test_a_toml_table_is_added_keeping_comments_and_other_tables() -> None:
    value = {"command": "/opt/x/bin/automl-setup-mcp", "args": []}
    new = set_table(CODEX_CONFIG, ("mcp_servers", "automl-setup"), value)
    assert new.startswith(CODEX_CONFIG)  # every byte of theirs kept, ours after it
    assert get_table(new, ("mcp_servers", "automl-setup")) == value
    assert get_table(new, ("mcp_servers", "other")) == {
        "command": "other-server",
        "args": ["--flag"],
    }
    again = set_table(new, ("mcp_servers", "automl-setup"), {**value, "args": ["-v"]})
    assert again.replace('args = ["-v"]', "args = []") == new  # a replacement touches only it
    middle = "[mcp_servers.other]\ncommand = 'o'\n\n[profiles.x]\nmodel = 'y'\n"
    inserted = set_table(middle, ("mcp_servers", "automl-setup"), value)
    opcodes = difflib.SequenceMatcher(None, middle.splitlines(), inserted.splitlines())
    assert {tag for tag, *_ in opcodes.get_opcodes()} == {"equal", "insert"}
    assert get_table(inserted, ("profiles", "x")) == {"model": "y"}


def test_toml_that_cannot_be_merged_is_refused() -> None:
    for bad in ("a = [\n", "mcp_servers = {a = 1}\n", "mcp_servers = 3\n"):
        with pytest.raises(TomlEditError):
            set_table(bad, ("mcp_servers", "automl-setup"), {"command": "x"})


def test_judge_names_every_state() -> None:
    a, b, c = "a" * 64, "b" * 64, "c" * 64
    assert judge(a, a, a).state == State.CURRENT and not judge(a, a, a).adopt
    assert judge(a, None, a).adopt  # identical already: recorded, not written
    assert judge(None, None, a).state == State.NEW
    assert judge(None, a, a).state == State.MISSING
    assert judge(a, a, b).state == State.STALE
    assert judge(a, a, None).state == State.RETIRED
    assert judge(b, a, c).state == State.EDITED
    assert judge(b, None, c).state == State.FOREIGN


# --- the bundle -----------------------------------------------------------------------------


def test_the_bundle_is_the_canonical_skills_folder() -> None:
    bundle = read_bundle()
    canonical = manifest(REPO_ROOT / "skills")
    assert bundle.skills == canonical["skills"]
    assert {(f.path, f.sha256) for f in bundle.files} == {
        (f["path"], f["sha256"]) for f in canonical["files"]
    }
    assert bundle.sha256 == canonical["bundle_sha256"]


# --- init in a project -----------------------------------------------------------------------


def test_init_writes_both_clients_and_merges_their_configs(tmp_path: Path) -> None:
    project = user_project(tmp_path / "proj")
    result = run_init(InitRequest(project=project))
    bundle = read_bundle()
    for folder in (".claude/skills", ".agents/skills"):
        for f in bundle.files:
            path = project / folder / f.path
            assert path.read_bytes() == f.data and not path.is_symlink()
    mcp = json.loads((project / ".mcp.json").read_text())
    assert mcp["mcpServers"]["other"] == {"command": "other-server", "args": []}
    assert mcp["extra"] is True
    command = mcp["mcpServers"]["automl-setup"]["command"]
    assert Path(command).is_absolute() and Path(command).name == "automl-setup-mcp"
    assert Path(command).exists()
    codex = (project / ".codex" / "config.toml").read_text()
    assert codex.startswith(CODEX_CONFIG) and f'command = "{command}"' in codex
    assert (project / "pyproject.toml").read_text().startswith("[project]")  # untouched
    assert {i.action for i in result.items} == {"created"}
    record = json.loads((project / RECORD_PATH).read_text())
    assert len(record["items"]) == 2 * len(bundle.files) + 2
    assert record["bundle_sha256"] == bundle.sha256


def test_a_second_init_is_a_no_op_and_check_passes(tmp_path: Path) -> None:
    project = user_project(tmp_path / "proj")
    run_init(InitRequest(project=project))
    before = snapshot(project)
    again = run_init(InitRequest(project=project))
    assert snapshot(project) == before
    assert {i.action for i in again.items} == {"unchanged"}
    checked = run_init(InitRequest(project=project, check=True))
    assert checked.ok and snapshot(project) == before


def test_an_edited_skill_copy_fails_check_and_is_never_overwritten(tmp_path: Path) -> None:
    project = user_project(tmp_path / "proj")
    run_init(InitRequest(project=project))
    edited = project / ".claude/skills/automl-setup/SKILL.md"
    edited.write_text(edited.read_text() + "\nmy local note\n")
    before = snapshot(project)

    check = run_cli("init", "--check", "--project", str(project))
    assert check.code == 1
    assert "edited   .claude/skills/automl-setup/SKILL.md" in check.stdout

    refused = run_cli("init", "--project", str(project))
    assert refused.code == 1
    assert "nothing was written" in refused.stderr
    assert ".claude/skills/automl-setup/SKILL.md: changed since init wrote it" in refused.stderr
    assert "+my local note" not in refused.stderr and "-my local note" in refused.stderr
    assert snapshot(project) == before


def test_another_automl_setup_server_entry_is_refused_naming_both(tmp_path: Path) -> None:
    project = user_project(tmp_path / "proj")
    theirs = '{\n  "mcpServers": {\n    "automl-setup": {"command": "their-own-wrapper"}\n  }\n}\n'
    (project / ".mcp.json").write_text(theirs)
    before = snapshot(project)
    result = run_cli("init", "--project", str(project), "--json")
    assert result.code == 1
    error = json.loads(result.stdout)["error"]
    (detail,) = [d for d in error["details"] if d.startswith(".mcp.json")]
    assert "not written by init" in detail
    assert '"command": "their-own-wrapper"' in detail and "automl-setup-mcp" in detail
    assert snapshot(project) == before  # not even the skills were written


def test_symlinked_skill_folders_are_refused(tmp_path: Path) -> None:
    project = user_project(tmp_path / "proj")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (project / ".claude").mkdir()
    (project / ".claude" / "skills").symlink_to(outside)
    before, victim = snapshot(project), tree_digest(outside)
    with pytest.raises(SetupError) as refused:
        run_init(InitRequest(project=project))
    assert "symbolic link" in "\n".join(refused.value.details)
    assert "outside the project" in "\n".join(refused.value.details)
    assert snapshot(project) == before and tree_digest(outside) == victim == {}


def test_a_project_that_is_not_a_folder_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("x")
    result = run_cli("init", "--project", str(file))
    assert result.code == 2 and "is not a directory" in result.stderr
    assert file.read_text() == "x"
    missing = run_cli("init", "--project", str(tmp_path / "nope"))
    assert missing.code == 2 and not (tmp_path / "nope").exists()


@pytest.mark.parametrize(
    ("rel", "text"),
    [(".codex/config.toml", "[mcp_servers\nbroken"), (".mcp.json", '{"mcpServers": {'),
     (".mcp.json", '{"mcpServers": []}')],
)  # fmt: skip
def test_an_unparsable_config_is_refused_changing_nothing(
    tmp_path: Path, rel: str, text: str
) -> None:
    project = user_project(tmp_path / "proj")
    (project / rel).write_text(text)
    before = snapshot(project)
    result = run_cli("init", "--project", str(project))
    assert result.code == 1 and f"cannot read {rel}" in result.stderr
    assert snapshot(project) == before


def test_check_before_any_init_and_a_bad_server_command(tmp_path: Path) -> None:
    project = user_project(tmp_path / "proj")
    before = snapshot(project)
    check = run_cli("init", "--check", "--project", str(project), "--json")
    assert check.code == 1 and json.loads(check.stdout)["ok"] is False
    assert "init has not run here" in run_cli("init", "--check", "--project", str(project)).stdout
    empty = run_cli("init", "--project", str(project), "--mcp-command")
    assert empty.code == 2 and "--mcp-command needs a command" in empty.stderr
    assert snapshot(project) == before
    named = run_cli("init", "--project", str(project), "--mcp-command", "automl-setup-mcp", "-v")
    assert named.code == 0, named.output
    entry = json.loads((project / ".mcp.json").read_text())["mcpServers"]["automl-setup"]
    assert (entry["command"], entry["args"]) == ("automl-setup-mcp", ["-v"])
    # A server entry whose absolute command is gone is stale for --check.
    run_cli("init", "--project", str(project), "--mcp-command", str(tmp_path / "gone"))
    stale = run_cli("init", "--check", "--project", str(project))
    assert stale.code == 1 and "does not exist" in stale.stdout


def test_a_skill_folder_that_is_a_symlink_loop_is_refused_on_every_version(
    tmp_path: Path,
) -> None:
    """Path.resolve() raised on the loop up to Python 3.12 (a crash), not from 3.13 on."""
    project = user_project(tmp_path / "proj")
    (project / ".claude").mkdir()
    (project / ".claude" / "skills").symlink_to("skills")
    before = snapshot(project)
    with pytest.raises(SetupError) as refused:
        run_init(InitRequest(project=project))
    assert "skills is a symbolic link to skills (a symlink loop)" in "\n".join(
        refused.value.details
    )
    assert snapshot(project) == before


def test_a_linked_record_folder_is_refused(tmp_path: Path) -> None:
    project = user_project(tmp_path / "proj")
    victim = tmp_path / "victim"
    victim.mkdir()
    (project / ".automl-setup").symlink_to(victim)
    before = snapshot(project)
    with pytest.raises(SetupError, match="symbolic link"):
        run_init(InitRequest(project=project))
    assert snapshot(project) == before and list(victim.iterdir()) == []


def _bundle_with(files: dict[str, bytes]) -> Bundle:
    real = read_bundle()
    return dataclasses.replace(
        real,
        version="9.9.9",
        files=tuple(BundledFile(p, d, False) for p, d in sorted(files.items())),
    )


def test_an_upgrade_replaces_what_init_wrote_and_removes_what_left_the_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = user_project(tmp_path / "proj")
    run_init(InitRequest(project=project, agents=("codex",)))
    files = {f.path: f.data for f in read_bundle().files}
    gone = "automl-slurm/SKILL.md"
    newer = {p: d + b"\nnewer\n" for p, d in files.items() if p != gone}
    newer["automl-new/SKILL.md"] = b"---\nname: automl-new\n---\n"
    user_file = project / ".agents/skills/automl-slurm/my-notes.md"
    user_file.write_text("mine")
    monkeypatch.setattr(init_module, "read_bundle", lambda: _bundle_with(newer))
    stale = run_init(InitRequest(project=project, agents=("codex",), check=True))
    assert not stale.ok
    assert {i.state for i in stale.items} == {State.STALE, State.NEW, State.RETIRED, State.CURRENT}

    result = run_init(InitRequest(project=project, agents=("codex",)))
    actions = {i.path: i.action for i in result.items}
    assert actions[f".agents/skills/{gone}"] == "removed"
    assert actions[".agents/skills/automl-new/SKILL.md"] == "created"
    assert actions[".agents/skills/automl-setup/SKILL.md"] == "updated"
    assert not (project / ".agents/skills" / gone).exists()
    assert user_file.read_text() == "mine"  # not init's: kept, and so is its folder
    for path, data in newer.items():
        assert (project / ".agents/skills" / path).read_bytes() == data
    assert not (project / ".claude").exists()  # only the client asked for
    assert run_init(InitRequest(project=project, agents=("codex",), check=True)).ok


def test_the_engine_table_is_merged_into_pyproject(tmp_path: Path) -> None:
    project = user_project(tmp_path / "proj")
    original = (project / "pyproject.toml").read_text()
    url = "file:///srv/git/engine.git"
    result = run_cli(
        "init", "--project", str(project), "--agent", "codex", "--repository", url,
        "--subdirectory", "packages/core", "--distribution", "my-core",
    )  # fmt: skip
    assert result.code == 0, result.output
    text = (project / "pyproject.toml").read_text()
    assert text.startswith(original)
    assert get_table(text, ("tool", "automl-setup", "engine")) == {
        "repository": url,
        "subdirectory": "packages/core",
        "distribution": "my-core",
    }
    shown = run_cli("config", "show", "--json", cwd=project)
    assert json.loads(shown.stdout)["engine"]["repository"] == url
    before = snapshot(project)
    secret = run_cli(
        "init", "--project", str(project), "--repository", "https://user:tok@example.com/e.git"
    )
    assert secret.code == 2 and "credentials" in secret.stderr and "tok" not in secret.output
    assert snapshot(project) == before


@pytest.mark.slow
def test_the_wheel_carries_the_skills_byte_identical(wheel_install: WheelInstall) -> None:
    canonical = {
        p.relative_to(REPO_ROOT / "skills").as_posix(): p.read_bytes()
        for p in (REPO_ROOT / "skills").rglob("*")
        if p.is_file()
    }
    prefix = f"mcp_server/{PACKAGE_DATA}/"
    with zipfile.ZipFile(wheel_install.wheel) as wheel:
        bundled = {
            name.removeprefix(prefix): wheel.read(name)
            for name in wheel.namelist()
            if name.startswith(prefix)
        }
    assert bundled == canonical
    # Installed, they are read as package data (not through any checkout).
    probe = "from mcp_server.bundle.contents import read_bundle; b = read_bundle(); "
    probe += "print(b.origin, b.sha256)"
    out = subprocess.run(
        [wheel_install.script("python"), "-I", "-c", probe], capture_output=True, text=True,
        check=True, cwd="/",
    ).stdout.split()  # fmt: skip
    assert out[-1] == manifest(REPO_ROOT / "skills")["bundle_sha256"]
    assert " ".join(out[:-1]) == f"the automl-setup {project_version()} package"


def test_the_uvx_launcher_pins_this_version_and_check_names_an_older_pin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--launcher uvx` writes the same entry on every machine, pinned to the version that ran
    init; a newer automl-setup's `init --check` calls it stale naming both versions and the
    command that updates it, and that command moves the pin."""
    from mcp_server import __version__
    from mcp_server.bundle import targets

    project = user_project(tmp_path / "proj")
    monkeypatch.setattr(targets, "__version__", "0.0.9")  # an older automl-setup ran init
    run_init(InitRequest(project=project, launcher="uvx"))
    pinned = ["--from", "automl-setup==0.0.9", "automl-setup-mcp"]
    entry = json.loads((project / ".mcp.json").read_text())["mcpServers"]["automl-setup"]
    assert (entry["command"], entry["args"]) == ("uvx", pinned)
    codex = get_table((project / ".codex/config.toml").read_text(), ("mcp_servers", "automl-setup"))
    assert (codex["command"], codex["args"]) == ("uvx", pinned)
    assert codex["startup_timeout_sec"] >= 120  # uvx may first fetch the pinned version
    assert run_init(InitRequest(project=project, check=True)).ok

    monkeypatch.setattr(targets, "__version__", __version__)  # this automl-setup
    before = snapshot(project)
    stale = run_init(InitRequest(project=project, check=True))
    assert not stale.ok and snapshot(project) == before
    details = {i.path: i.detail for i in stale.items if i.state == State.STALE}
    for path in (".mcp.json", ".codex/config.toml"):
        assert "it starts automl-setup 0.0.9 (uvx --from automl-setup==0.0.9)" in details[path]
        assert f"this is automl-setup {__version__}" in details[path]
        assert "`automl-setup init --launcher uvx`" in details[path]
    updated = run_init(InitRequest(project=project, launcher="uvx"))
    assert {i.path for i in updated.items if i.action == "updated"} == {
        ".mcp.json",
        ".codex/config.toml",
    }
    entry = json.loads((project / ".mcp.json").read_text())["mcpServers"]["automl-setup"]
    assert entry["args"] == ["--from", f"automl-setup=={__version__}", "automl-setup-mcp"]
    assert run_init(InitRequest(project=project, check=True)).ok


def test_launcher_and_mcp_command_together_are_refused(tmp_path: Path) -> None:
    project = user_project(tmp_path / "proj")
    before = snapshot(project)
    result = run_cli("init", "--project", str(project), "--launcher", "uvx", "--mcp-command", "x")
    assert result.code == 2 and "--launcher and --mcp-command both name" in result.stderr
    assert snapshot(project) == before
