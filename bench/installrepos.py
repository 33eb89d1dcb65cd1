"""The repositories bench/install.py installs from, and the helpers it runs commands with.

a  the small reference-engine repository (the engine on `main`, nothing else);
b  a generated monorepo whose history carries --blob-mb of incompressible blobs outside the
   engine's subdirectory (some deleted again, so they live only in history), with the engine
   committed on top; built once into <workdir>/cache/ and reused on reruns;
c  the reference engine with heavy dependencies from the index (HEAVY), as real engines have.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from mcp_server.source.sourcerepo import SourceRepository

MIB = 1 << 20
FILE_MB = 8  # size of each random blob file
BLOB_FOLDERS = ("datasets", "checkpoints", "media", "vendor", "third_party", "assets")
DELETED_FOLDERS = BLOB_FOLDERS[:3]  # removed again before the engine commit: history only
MONOREPO_FORMAT = 1  # bump when the generated layout changes, so old caches are not reused
SERVED_CONFIG = {"uploadpack.allowFilter": "true", "uploadpack.allowAnySHA1InWant": "true"}
# Scenario c's dependencies: what an AutoML engine such as tao-automl pulls in (their wheels,
# hundreds of MB installed, come from the warm uv cache).
HEAVY = ("numpy", "scipy", "scikit-learn", "pandas")


class BenchError(RuntimeError):
    """A command the benchmark relies on failed; the message carries its output."""


def run(argv: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    if proc.returncode != 0:
        raise BenchError(f"{' '.join(argv)} exited {proc.returncode}\n{proc.stdout}{proc.stderr}")
    return proc.stdout.strip()


def git(*args: str, cwd: Path) -> str:
    return run(["git", *args], cwd=cwd)


def disk_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / MIB


# --------------------------------------------------------------------------------------------
# Repositories


def small_repository(root: Path) -> tuple[str, str]:
    """(url, commit) of a fresh reference-engine repository with the engine on main."""
    shutil.rmtree(root, ignore_errors=True)
    repo = SourceRepository(root)
    return repo.url, repo.commit_engine("main", marker="bench")


def heavy_repository(root: Path) -> tuple[str, str]:
    """(url, commit) of a reference-engine repository whose engine requires HEAVY."""
    shutil.rmtree(root, ignore_errors=True)
    repo = SourceRepository(root)
    return repo.url, repo.commit_engine("main", marker="heavy", dependencies=list(HEAVY))


def monorepo(cache: Path, blob_mb: int) -> tuple[str, str, Path]:
    """(url, commit, bare repository) of the generated monorepo, built once per size."""
    root = cache / f"monorepo-{blob_mb}mb-v{MONOREPO_FORMAT}"
    bare = root / "origin.git"
    ready = root / "READY"
    if not ready.exists():
        print(f"building the {blob_mb} MB monorepo in {root} (once; reused on reruns) ...")
        started = time.perf_counter()
        shutil.rmtree(root, ignore_errors=True)
        _generate_monorepo(root, blob_mb)
        ready.write_text("complete\n", encoding="utf-8")
        print(f"  built in {time.perf_counter() - started:.1f} s")
    for key, value in SERVED_CONFIG.items():
        if git("config", "--get", key, cwd=bare) != value:
            raise BenchError(f"{bare}: {key} is not {value}")
    return bare.resolve().as_uri(), git("rev-parse", "refs/heads/main", cwd=bare), bare


def _generate_monorepo(root: Path, blob_mb: int) -> None:
    repo = SourceRepository(root)
    # Pushed packs are kept as packs on the served side (as a host stores them), and random
    # blobs are neither compressed nor delta-searched while building (they would not shrink).
    git("config", "receive.unpackLimit", "1", cwd=repo.bare)
    for key, value in (("core.compression", "0"), ("core.bigFileThreshold", "1m")):
        git("config", key, value, cwd=repo.work)
    total = blob_mb * MIB
    share, rest = divmod(total, len(BLOB_FOLDERS))
    for index, folder in enumerate(BLOB_FOLDERS):
        remaining = share + (rest if index == len(BLOB_FOLDERS) - 1 else 0)
        part = 0
        while remaining > 0:
            size = min(FILE_MB * MIB, remaining)
            path = repo.work / folder / f"blob-{part:03d}.bin"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(os.urandom(size))
            remaining -= size
            part += 1
        git("add", "--", folder, cwd=repo.work)
        git("commit", "-q", "-m", f"add {folder}", cwd=repo.work)
    git("rm", "-r", "-q", "--", *DELETED_FOLDERS, cwd=repo.work)
    git("commit", "-q", "-m", f"remove {', '.join(DELETED_FOLDERS)}", cwd=repo.work)
    git("push", "-q", "origin", "refs/heads/main:refs/heads/main", cwd=repo.work)
    repo.commit_engine("main", marker="monorepo")
    shutil.rmtree(repo.work)  # only the served bare repository is needed
