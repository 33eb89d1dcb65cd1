"""An upgrade across two real, published versions, as a user lives it: a project set up by the
first (init, an installed engine, a launched and interrupted experiment, a kept store entry)
is used by the second after `uv tool upgrade automl-setup`, which reads every record, binding,
ledger and store entry the first wrote and resumes the experiment to the end; its `init`
replaces only what init wrote and nobody changed, adds the new skill, removes the retired one
and refuses a locally edited one with its diff. Then a downgrade (`uv tool install
automl-setup==<first>`) reads what it can and refuses, naming the format and the version that
wrote it, what it cannot: never a crash, never a rewrite in the older format.

The next version is a copy of this checkout with the version raised, one skill changed, one
added and one removed, and (so that the downgrade meets a file it cannot read) the format of
the init record raised to 3, read beside format 2."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from packaging.version import Version
from support.projects import user_project
from support.release import (
    DISTRIBUTION,
    PackageIndex,
    ReleaseDists,
    build_dists,
    copy_checkout,
    project_version,
    tool_env,
)
from support.trees import snapshot

from mcp_server.children.uv import uv_binary
from mcp_server.source.sourcerepo import (
    REFERENCE_DISTRIBUTION,
    create_reference_repository,
    quadratic_manifest,
)

pytestmark = pytest.mark.slow
# The release after this checkout's version (0.2.0 after 0.2.0.dev0; 0.2.1 after 0.2.0).
_CURRENT = Version(project_version())
NEXT = (
    _CURRENT.base_version
    if _CURRENT.is_prerelease
    else f"{_CURRENT.major}.{_CURRENT.minor}.{_CURRENT.micro + 1}"
)
CHANGED, ADDED, RETIRED = "automl-setup", "automl-extra", "automl-slurm"
EXPERIMENT = "upgrade-exp"


def _next_version(root: Path, epoch: int) -> tuple[Path, Path]:
    tree = copy_checkout(root / "next", NEXT)
    skill = tree / "skills" / CHANGED / "SKILL.md"
    skill.write_text(skill.read_text() + "\nA line the next version adds.\n")
    added = tree / "skills" / ADDED / "SKILL.md"
    added.parent.mkdir()
    added.write_text(
        f"---\nname: {ADDED}\ndescription: A skill the next version adds. Use it to check "
        "upgrades.\nlicense: Apache-2.0\n---\n\n# Extra\n\nNothing more.\n"
    )
    shutil.rmtree(tree / "skills" / RETIRED)
    ownership = tree / "mcp_server" / "bundle" / "ownership.py"
    text = ownership.read_text()
    assert "    schema_version: Literal[2] = 2\n" in text
    ownership.write_text(
        text.replace("schema_version: Literal[2] = 2", "schema_version: Literal[2, 3] = 3")
    )
    return build_dists(tree, root / "next-dist", epoch)


class Tool:
    """The `automl-setup` that `uv tool` put on the private PATH, run in the user's project."""

    def __init__(self, env: dict[str, str], project: Path) -> None:
        self.env, self.project = env, project

    def uv(self, *args: str) -> None:
        done = subprocess.run(
            [uv_binary(), "tool", *args], env=self.env, cwd=self.project,
            capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr

    def __call__(self, *args: str, code: int | None = 0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(Path(self.env["UV_TOOL_BIN_DIR"]) / "automl-setup"), *args], env=self.env,
            cwd=self.project, capture_output=True, text=True, stdin=subprocess.DEVNULL,
            timeout=600, check=False,
        )  # fmt: skip
        if code is not None:
            assert done.returncode == code, (args, done.stdout + done.stderr)
        return done

    def status(self) -> dict:
        return json.loads(self("status", "--experiment-id", EXPERIMENT, "--json").stdout)


def test_an_upgrade_keeps_everything_and_a_downgrade_refuses_what_it_cannot_read(
    tmp_path: Path, package_index: PackageIndex, release_dists: ReleaseDists
) -> None:
    first = release_dists.version
    next_sdist, next_wheel = _next_version(tmp_path, release_dists.epoch)
    package_index.upload(release_dists.sdist, release_dists.wheel)
    env = tool_env(tmp_path / "tool", package_index)
    env["AUTOML_SETUP_STORE"] = str(tmp_path / "store")
    project = user_project(tmp_path / "proj")
    (project / "automl-setup.toml").write_text('workspace = "runs"\npython = ".venv-train"\n')
    tool = Tool(env, project)

    # --- the first version sets the project up
    tool.uv("install", DISTRIBUTION)
    assert tool("--version").stdout.strip() == f"automl-setup {release_dists.build}"
    tool("init")
    repo = create_reference_repository(tmp_path / "engine-repo")
    profile = ["--repository", repo.url, "--subdirectory", repo.subdirectory,
               "--distribution", REFERENCE_DISTRIBUTION]  # fmt: skip
    tool("install", "--branch", "main", "--create-env", *profile)
    manifest = project / "m.json"
    # Trials of 2 s: the stop below must land while the experiment still runs, however slowly
    # a loaded machine starts the `stop` command (0.6 s trials ended first under load).
    manifest.write_text(json.dumps(quadratic_manifest(
        EXPERIMENT, seed=3, max_trials=6, sleep=2.0, total_timeout_s=300
    )))  # fmt: skip
    tool("launch", "--manifest", str(manifest), "--detach")
    deadline = time.monotonic() + 120
    while (tool.status()["trials_done"] or 0) < 1:
        assert time.monotonic() < deadline, tool.status()
        time.sleep(0.2)
    tool("stop", "--experiment-id", EXPERIMENT)
    assert tool.status()["state"] == "interrupted"
    tool("store", "keep", "--experiment-id", EXPERIMENT)
    edited = project / ".agents" / "skills" / CHANGED / "SKILL.md"
    edited.write_text(edited.read_text() + "\nOur team's own note.\n")
    state = snapshot(project)

    # --- the next version, by `uv tool upgrade`
    package_index.upload(next_sdist, next_wheel)
    tool.uv("upgrade", DISTRIBUTION)
    assert tool("--version").stdout.strip() == f"automl-setup {NEXT}"
    refused = tool("init", code=1)
    assert "changed since init wrote it" in refused.stderr, refused.stderr
    assert "+Our team's own note." not in refused.stderr  # the diff: theirs against the new
    assert "-Our team's own note." in refused.stderr and "+A line the next version adds." in (
        refused.stderr
    )
    assert snapshot(project) == state  # refused as a whole: nothing written
    edited.unlink()  # the team keeps its note elsewhere; init may write the file again
    done = json.loads(tool("init", "--json").stdout)
    actions = {item["path"]: item["action"] for item in done["items"]}
    for folder in (".claude/skills", ".agents/skills"):
        assert actions[f"{folder}/{ADDED}/SKILL.md"] == "created"
        assert actions[f"{folder}/{RETIRED}/SKILL.md"] == "removed"
        assert not (project / folder / RETIRED).exists()
    assert actions[f".claude/skills/{CHANGED}/SKILL.md"] == "updated"
    assert actions[f".agents/skills/{CHANGED}/SKILL.md"] == "restored"
    assert tool("init", "--check").returncode == 0
    assert json.loads((project / ".automl-setup" / "init.json").read_text())["schema_version"] == 3

    # Everything the first version wrote, read by the second.
    assert tool.status()["state"] == "interrupted"
    tool("verify", "--experiment-id", EXPERIMENT, "--workspace", "runs")
    tool("store", "verify")
    tool("history")
    tool("resume", "--experiment-id", EXPERIMENT, "--manifest", str(manifest))
    final = tool.status()
    assert final["state"] == "completed" and final["trials_done"] == 6, final

    # --- back to the first version
    tool.uv("install", f"{DISTRIBUTION}=={first}")
    assert tool("--version").stdout.strip() == f"automl-setup {release_dists.build}"
    record = (project / ".automl-setup" / "init.json").read_bytes()
    before = snapshot(project)
    for args in (("init", "--check"), ("init",)):
        out = tool(*args, code=1)
        assert f"was written in format 3 by automl-setup {NEXT}, newer than this automl-setup " in (
            out.stderr
        ), out.stderr
        assert "Traceback" not in out.stderr and "unexpected failure" not in out.stderr
    assert (project / ".automl-setup" / "init.json").read_bytes() == record  # never rewritten
    assert snapshot(project) == before
    assert tool.status()["state"] == "completed"  # what it can read, it reads
    tool("verify", "--experiment-id", EXPERIMENT, "--workspace", "runs")
    tool("history")
