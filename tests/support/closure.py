"""The closure's world: an engine requiring `depa @ git+file://…` (no commit), which requires
`depb @ git+file://…` and a versioned package from a local find-links folder."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from support.cli import profile_args, run_cli

from mcp_server.children.uv import uv_binary
from mcp_server.source.sourcerepo import SourceRepository

DEPA, DEPB, IDX = "automl-fixture-depa", "automl-fixture-depb", "automl-fixture-idx"


HISTORY = ".automl-setup/history.jsonl"


GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@localhost", "-c", "commit.gpgsign=false"]


def package(root: Path, name: str, version: str, requires: list[str], marker: str) -> Path:
    module = name.replace("-", "_")
    (root / module).mkdir(parents=True, exist_ok=True)
    (root / module / "__init__.py").write_text(
        f"MARKER = {marker!r}\n\n\ndef main() -> None: ...\n"
    )
    deps = ", ".join(json.dumps(r) for r in requires)
    # A console script: uv writes it with this environment's interpreter in its first line.
    script = f'[project.scripts]\n{name}-tool = "{module}:main"\n\n' if name == DEPB else ""
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling>=1.25"]\nbuild-backend = "hatchling.build"\n\n'
        f'[project]\nname = "{name}"\nversion = "{version}"\ndependencies = [{deps}]\n\n'
        f"{script}[tool.hatch.metadata]\nallow-direct-references = true\n"
    )
    return root


@dataclass
class DepRepo:
    """A bare repository of one dependency and its working clone."""

    root: Path
    name: str
    requires: list[str]

    def __post_init__(self) -> None:
        self.bare, self.work = self.root / f"{self.name}.git", self.root / f"{self.name}-work"
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(self.bare)], check=True)
        subprocess.run(["git", "init", "-q", "-b", "main", str(self.work)], check=True)
        self.commit("1")

    @property
    def url(self) -> str:
        return f"git+{self.bare.as_uri()}"

    def commit(self, marker: str) -> str:
        package(self.work, self.name, "1.0", self.requires, marker)
        subprocess.run([*GIT, "-C", str(self.work), "add", "-A"], check=True)
        subprocess.run([*GIT, "-C", str(self.work), "commit", "-qm", marker], check=True)
        push = [*GIT, "-C", str(self.work), "push", "-q", str(self.bare), "HEAD:refs/heads/main"]
        subprocess.run(push, check=True)
        return self.head()

    def head(self, back: int = 0) -> str:
        out = subprocess.run(
            ["git", "-C", str(self.bare), "rev-parse", f"refs/heads/main~{back}"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        return out.stdout.strip()


@dataclass
class World:
    engine: SourceRepository
    depa: DepRepo
    depb: DepRepo
    links: Path

    def add_index_version(self, version: str) -> None:
        project = package(self.links.parent / f"idx-{version}", IDX, version, [], version)
        argv = [uv_binary(), "build", "--wheel", "--quiet", "--out-dir", str(self.links)]
        subprocess.run([*argv, str(project)], check=True, capture_output=True)


def install(world: World, env: Path, branch: str, *extra: str) -> object:
    return run_cli(
        "install", "--branch", branch, "--python", str(env), *profile_args(world.engine), *extra
    )


def uv_pip(env: Path, *args: str) -> None:
    argv = [uv_binary(), "pip", "install", "--quiet", "--python", str(env / "bin" / "python")]
    subprocess.run([*argv, *args], check=True, capture_output=True)
