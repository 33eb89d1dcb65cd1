"""Source repositories of the reference engine and environments it is installed into."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from support.cli import REPO_ROOT, profile_args, run_cli

from mcp_server.children.uv import uv_binary
from mcp_server.source.sourcerepo import SourceRepository


def make_venv(path: Path) -> Path:
    """An empty venv of the running interpreter, made with uv."""
    subprocess.run(
        [uv_binary(), "venv", "--quiet", "--python", sys.executable, str(path)],
        check=True,
        capture_output=True,
    )
    return path


def new_source_repo(root: Path) -> SourceRepository:
    """`main` and `dev/next` with distinct engine sources."""
    repo = SourceRepository(root)
    repo.commit_engine("main", marker="main-1")
    repo.commit_engine("dev/next", base="main", marker="dev-next-1")
    return repo


def install_main(env_dir: Path, repo: SourceRepository) -> Path:
    """`automl-setup install --create-env` of `main` into env_dir, through the real CLI."""
    result = run_cli(
        "install", "--branch", "main", "--python", str(env_dir), "--create-env",
        *profile_args(repo),
    )  # fmt: skip
    assert result.code == 0, result.output
    return env_dir


def engine_bytecode(env_dir: Path) -> dict[str, str]:
    """The sha256 of every bytecode file of the installed reference engine: written by the
    install, never again (nothing automl-setup starts writes any)."""
    (site,) = env_dir.glob("lib/python*/site-packages")
    root = site / "automl_refengine"
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*.pyc"))
    }


def engine_marker(env_dir: Path) -> str:
    """Import the installed engine in its own interpreter and return its build marker."""
    proc = subprocess.run(
        [
            str(env_dir / "bin" / "python"),
            "-c",
            "import automl_refengine._build_marker as m; print(m.MARKER)",
        ],
        capture_output=True,
        text=True,
        check=True,
        stdin=subprocess.DEVNULL,
    )
    return proc.stdout.strip()


def checkout_copy(root: Path) -> Path:
    """This repository as a user's clone has it: the files git tracks (and new ones it does not
    ignore), without this checkout's .venv."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for rel in filter(None, listed):
        source = REPO_ROOT / rel
        if source.is_file():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, root / rel)
    return root


@dataclass(frozen=True)
class WheelInstall:
    """automl-setup as a user gets it: the wheel built from this checkout, installed without
    extras into a fresh venv outside the checkout (as `uv tool install` or pip would)."""

    wheel: Path
    venv: Path

    def script(self, name: str) -> str:
        return str(self.venv / "bin" / name)


def site_packages(env_dir: Path) -> Path:
    """The one site-packages folder of a venv."""
    (site,) = env_dir.glob("lib/python*/site-packages")
    return site
