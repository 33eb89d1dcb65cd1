"""Local git source repositories built from the embedded reference engine.

Used by `automl-setup demo`, the tests and the benchmarks: a bare repository served over
file:// (with partial clone allowed, like the big hosts), and a work tree to commit from.
"""

from __future__ import annotations

import json
import re
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

from mcp_server.children.git import LOCAL_TIMEOUT_S, run_git

REFERENCE_DISTRIBUTION = "automl-refengine"
REFERENCE_VERSION = "0.1.0"
REFERENCE_IMPORT = "automl_refengine"
DEFAULT_SUBDIRECTORY = "packages/automl-core"
_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", "dist", "build")


def reference_engine_source() -> Path:
    """The reference engine's source tree inside the installed automl-setup package."""
    return Path(str(resources.files("mcp_server") / "reference_engine"))


class SourceRepository:
    """A bare `origin.git` plus a `work` clone under `root`; every method commits or pushes."""

    def __init__(self, root: Path, subdirectory: str = DEFAULT_SUBDIRECTORY) -> None:
        self.root = root
        self.subdirectory = subdirectory
        self.bare = root / "origin.git"
        self.work = root / "work"
        root.mkdir(parents=True, exist_ok=True)
        self._git("init", "-q", "--bare", "--template=", str(self.bare))
        for key in ("uploadpack.allowFilter", "uploadpack.allowAnySHA1InWant"):
            self._git("config", key, "true", cwd=self.bare)
        self._git("init", "-q", "--template=", "-b", "main", str(self.work))
        for key, value in (
            ("user.name", "automl-setup"),
            ("user.email", "automl-setup@localhost"),
            ("commit.gpgsign", "false"),
            ("tag.gpgsign", "false"),
        ):
            self._git("config", key, value, cwd=self.work)
        self._git("remote", "add", "origin", str(self.bare), cwd=self.work)

    @property
    def url(self) -> str:
        return self.bare.resolve().as_uri()

    def _git(self, *args: str, cwd: Path | None = None) -> str:
        step = "source repository"
        return run_git(list(args), cwd=cwd, step=step, timeout=LOCAL_TIMEOUT_S, watch=None)

    def head(self, branch: str) -> str:
        return self._git("rev-parse", f"refs/heads/{branch}", cwd=self.bare)

    def commit_engine(
        self,
        branch: str,
        *,
        base: str | None = None,
        marker: str = "",
        distribution: str = REFERENCE_DISTRIBUTION,
        version: str = REFERENCE_VERSION,
        files: dict[str, str | None] | None = None,
        message: str = "",
        push: bool = True,
        force: bool = False,
        dependencies: list[str] | None = None,
    ) -> str:
        """Commit the reference engine (renamed/re-versioned as asked) on `branch`.

        `base` starts a new branch from that branch or commit; `marker` changes the engine's
        source so each commit has a distinct subtree; `files` writes (or, with None, deletes)
        extra paths relative to the repository root; `dependencies` are added to the engine's
        own requirements."""
        self._checkout(branch, base)
        target = self.work / self.subdirectory
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(reference_engine_source(), target, ignore=_IGNORED)
        pyproject = target / "pyproject.toml"
        text = pyproject.read_text(encoding="utf-8")
        text = re.sub(r'(?m)^name = ".*"$', f'name = "{distribution}"', text, count=1)
        text = re.sub(r'(?m)^version = ".*"$', f'version = "{version}"', text, count=1)
        if dependencies:
            extra = "".join(f", {json.dumps(d)}" for d in dependencies)
            pattern = r"(?m)^(dependencies = \[.*)\]$"
            text = re.sub(pattern, lambda m: f"{m.group(1)}{extra}]", text, count=1)
            text += "\n[tool.hatch.metadata]\nallow-direct-references = true\n"
        pyproject.write_text(text, encoding="utf-8")
        (target / "src" / REFERENCE_IMPORT / "_build_marker.py").write_text(
            f'"""Distinguishes commits of the test repositories."""\n\nMARKER = {marker!r}\n',
            encoding="utf-8",
        )
        for rel, content in (files or {}).items():
            path = self.work / rel
            if content is None:
                path.unlink(missing_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(content, encoding="utf-8")
        self._git("add", "-A", cwd=self.work)
        self._git(
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            message or f"{distribution} {version} {marker}".strip(),
            cwd=self.work,
        )
        sha = self._git("rev-parse", "HEAD", cwd=self.work)
        if push:
            self.push(branch, force=force)
        return sha

    def _checkout(self, branch: str, base: str | None) -> None:
        if base is not None:
            self._git("checkout", "-q", "-B", branch, base, cwd=self.work)
        elif self._git("branch", "--list", branch, cwd=self.work):
            self._git("checkout", "-q", branch, cwd=self.work)
        else:
            self._git("checkout", "-q", "--orphan", branch, cwd=self.work)

    def push(self, branch: str, *, force: bool = False) -> None:
        spec = f"{'+' if force else ''}refs/heads/{branch}:refs/heads/{branch}"
        self._git("push", "-q", "origin", spec, cwd=self.work)

    def reset_branch(self, branch: str, commit: str) -> None:
        """Move `branch` to `commit` locally and force-push it (a rewritten history)."""
        self._git("checkout", "-q", "-B", branch, commit, cwd=self.work)
        self.push(branch, force=True)

    def delete_branch(self, branch: str) -> None:
        self._git("push", "-q", "origin", f":refs/heads/{branch}", cwd=self.work)

    def tag(self, name: str, commit: str) -> None:
        self._git("tag", "-f", name, commit, cwd=self.work)
        self._git("push", "-q", "-f", "origin", f"refs/tags/{name}:refs/tags/{name}", cwd=self.work)

    def gc_prune(self) -> None:
        """Drop unreachable objects from the served repository (after a force-push)."""
        self._git("reflog", "expire", "--expire=now", "--all", cwd=self.bare)
        self._git("gc", "-q", "--prune=now", cwd=self.bare)


def quadratic_manifest(
    experiment_id: str,
    *,
    seed: int,
    max_trials: int,
    sleep: float,
    total_timeout_s: float,
) -> dict[str, Any]:
    """A small random search over the installed reference engine's quadratic workload (the
    manifest the tests and the benchmarks launch through automl-setup)."""
    argv = ["{python}", "-m", "automl_refengine.workloads.quadratic"]
    argv += ["--params", "{params_json}", "--out", "{trial_dir}/metrics.json"]
    argv += ["--sleep", str(sleep)]
    return {
        "search": {
            "experiment_id": experiment_id,
            "algorithm": "random",
            "seed": seed,
            "objective": {"metric": "loss", "direction": "minimize"},
            "budget": {
                "max_trials": max_trials,
                "trial_timeout_s": 60.0,
                "total_timeout_s": total_timeout_s,
            },
            "parameters": {
                "x": {"type": "float", "low": -1.0, "high": 1.0},
                "y": {"type": "float", "low": -1.0, "high": 1.0},
                "opt": {"type": "categorical", "choices": ["adam", "sgd", "rmsprop"]},
            },
        },
        "workload": {"argv": argv, "metrics_file": "metrics.json"},
        "execution": {"pass_env": []},
    }


def create_reference_repository(root: Path, *, dev_branch: str = "dev/next") -> SourceRepository:
    """The demo's repository: `main` with the reference engine, and a development branch."""
    repo = SourceRepository(root)
    repo.commit_engine("main", marker="main")
    repo.commit_engine(dev_branch, base="main", marker=dev_branch)
    return repo
