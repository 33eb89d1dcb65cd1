"""Shared fixtures: real git repositories built from the reference engine, real venvs, and the
real command line run as a subprocess."""

from __future__ import annotations

import compileall
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mcp_server.environment.wheelstore import STORE_ENV
from mcp_server.source.sourcerepo import (
    REFERENCE_DISTRIBUTION,
    SourceRepository,
)
from mcp_server.source.wheelbuild import uv_binary

REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run_cli(
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 300,
    cwd: Path | None = None,
) -> CliResult:
    """`automl-setup ARGS` as a real process (the installed console script's module)."""
    # A VIRTUAL_ENV inherited from the developer's shell must not pick the target for a test.
    full_env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "mcp_server.faces.cli", *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=full_env,
        cwd=cwd,
        timeout=timeout,
        check=False,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def profile_args(repo: SourceRepository) -> list[str]:
    """Profile flags that point automl-setup at a local reference-engine repository."""
    return [
        "--repository",
        repo.url,
        "--subdirectory",
        repo.subdirectory,
        "--distribution",
        REFERENCE_DISTRIBUTION,
    ]


def tree_digest(root: Path, *, skip: Callable[[Path], bool] = lambda p: False) -> dict[str, str]:
    """sha256 of every regular file under root (symlinks by target), for byte-identity checks."""
    out: dict[str, str] = {}
    if not root.exists():
        return out
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if "__pycache__" in rel.parts or skip(rel):
            continue
        if path.is_symlink():
            out[str(rel)] = "link:" + os.readlink(path)
        elif path.is_file():
            out[str(rel)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def make_venv(path: Path) -> Path:
    """An empty venv of the running interpreter, made with uv."""
    subprocess.run(
        [uv_binary(), "venv", "--quiet", "--python", sys.executable, str(path)],
        check=True,
        capture_output=True,
    )
    return path


def env_snapshot(env_dir: Path) -> dict[str, str]:
    """Everything an install may touch in a venv: packages, scripts and the automl-setup state
    (except the lock file, whose pid text changes by design)."""
    return tree_digest(env_dir, skip=lambda rel: rel.name == "lock")


SHARES_INSTALLED_ENV = "shares_installed_env"


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: two workers more than the cores. Most tests wait on git, uv, the package
    index, engines, the agent clients and the scheduler rather than compute, so the extra
    workers fill those waits (on two cores: two workers 6 min 37 s and three 5 min 46 s for the
    910 tests of an earlier suite; for today's 963, three 7 min 28 s to 8 min 16 s in CI, four
    7 min 9 s)."""
    return (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    ) + 2


# The files that take longest, longest first (measured: `--durations=0`, summed per file). With
# `--dist loadfile` a worker takes whole files in collection order, so these start first and no
# long file is left to run alone at the end.
LONGEST_FIRST = (
    "test_experiments_resume.py",
    "test_install.py",
    "test_experiments.py",
    "test_spine_experiments.py",
    "test_install_crash.py",
    "test_closure.py",
    "test_sft_demo.py",
    "test_spine_target.py",
    "test_spine_records.py",
    "test_skills_ci.py",
    "test_slurm_controller.py",
    "test_mcp_server.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: n for n, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: file order kept


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{SHARES_INSTALLED_ENV}: the test only reads `installed_env` and `source_repo`, so it "
        "gets the session's one install instead of its own (teardown asserts nothing changed)",
    )
    if not hasattr(config, "workerinput"):  # once, in the controlling process
        # The checkout is installed editable, and this machine sets PYTHONDONTWRITEBYTECODE=1:
        # every CLI process the tests start (about a thousand) compiled all of mcp_server from
        # source again, 0.1 s of CPU each on two busy cores. Compiled once here (a second on
        # the first run, nothing after), they read it; nothing else writes bytecode.
        compileall.compile_dir(REPO_ROOT / "mcp_server", quiet=1, workers=0)


@pytest.fixture(scope="session", autouse=True)
def wheel_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every install keeps its wheel in the store: the session's own, never the user's cache
    (the CLI subprocesses inherit it)."""
    root = tmp_path_factory.mktemp("wheel-store")
    previous = os.environ.get(STORE_ENV)
    os.environ[STORE_ENV] = str(root)
    yield root
    if previous is None:
        os.environ.pop(STORE_ENV, None)
    else:
        os.environ[STORE_ENV] = previous


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


@pytest.fixture(scope="session")
def shared_install(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[SourceRepository, Path]]:
    """One source repository and one install of `main`, for tests that only read them. At the
    end of the session it must be exactly as installed (directories included), whoever used it."""
    root = tmp_path_factory.mktemp("shared-install")
    repo = new_source_repo(root / "repo")
    env = install_main(root / "env", repo)

    def state() -> tuple[dict[str, str], list[Path]]:  # files, and automl-setup's own folders
        folders = (p for p in (env / ".automl-setup").rglob("*") if p.is_dir())
        return env_snapshot(env), sorted(folders)

    before = state()
    yield repo, env
    assert state() == before, "a test changed the session's shared install (registered?)"


def _shares(request: pytest.FixtureRequest) -> bool:
    return request.node.get_closest_marker(SHARES_INSTALLED_ENV) is not None


@pytest.fixture
def source_repo(request: pytest.FixtureRequest, tmp_path: Path) -> SourceRepository:
    """`main` and `dev/next` with distinct engine sources (the session's, for a sharing test)."""
    if _shares(request):
        repo: SourceRepository = request.getfixturevalue("shared_install")[0]
        return repo
    return new_source_repo(tmp_path / "repo")


@pytest.fixture
def installed_env(
    request: pytest.FixtureRequest, tmp_path: Path, source_repo: SourceRepository
) -> Iterator[Path]:
    """A venv with the reference engine installed from `main` by automl-setup: the test's own,
    or, for a test marked shares_installed_env, the session's, which it must leave as it was."""
    if not _shares(request):
        yield install_main(tmp_path / "env", source_repo)
        return
    env_dir: Path = request.getfixturevalue("shared_install")[1]
    before = env_snapshot(env_dir), tree_digest(source_repo.root)
    yield env_dir
    # A failure here names the test that broke the promise, before the next sharer trips on it.
    assert (env_snapshot(env_dir), tree_digest(source_repo.root)) == before, (
        f"{request.node.nodeid} is marked {SHARES_INSTALLED_ENV} but changed the shared "
        "environment or source repository: give it its own (remove the marker)"
    )


# A user's own repository, as `automl-setup init` meets it.
CODEX_CONFIG = '# my Codex settings\nmodel = "o4"  # keep this\n\n[mcp_servers.other]\ncommand = "other-server"\nargs = ["--flag"]\n'  # noqa: E501
MCP_JSON = '{\n    "mcpServers": {\n        "other": {"command": "other-server", "args": []}\n    },\n    "extra": true\n}\n'  # noqa: E501


def user_project(root: Path) -> Path:
    """A user's repository: a git repo with its own pyproject.toml, an .mcp.json holding another
    server, and a .codex/config.toml with a comment and another server."""
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "pyproject.toml").write_text('[project]\nname = "my-training"\nversion = "1.0"\n')
    (root / ".mcp.json").write_text(MCP_JSON)
    (root / ".codex").mkdir()
    (root / ".codex" / "config.toml").write_text(CODEX_CONFIG)
    return root


def snapshot(project: Path) -> dict[str, str]:
    """Every file of a project but its .git, for byte-identity checks."""
    return tree_digest(project, skip=lambda rel: rel.parts[0] == ".git")


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


@pytest.fixture(scope="session")
def wheel_install(tmp_path_factory: pytest.TempPathFactory) -> WheelInstall:
    root = tmp_path_factory.mktemp("from-wheel")
    uv = uv_binary()
    build = [uv, "build", "--wheel", "--quiet", "--out-dir", str(root / "dist"), str(REPO_ROOT)]
    subprocess.run(build, check=True, capture_output=True, stdin=subprocess.DEVNULL)
    (wheel,) = (root / "dist").glob("automl_setup-*.whl")
    venv = make_venv(root / "venv")
    install = [
        uv,
        "pip",
        "install",
        "--quiet",
        "--python",
        str(venv / "bin" / "python"),
        str(wheel),
    ]
    subprocess.run(install, check=True, capture_output=True, stdin=subprocess.DEVNULL)
    return WheelInstall(wheel, venv)


def outside_env() -> dict[str, str]:
    """The environment of a process run as a user would: no VIRTUAL_ENV of the developer's."""
    return {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}


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


@dataclass(frozen=True)
class SlurmCluster:
    """The running test cluster (tests/slurm/cluster.sh): its configuration and environment."""

    conf: Path

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}


def start_requeued_job(job_id: str, env: dict[str, str] | None = None) -> None:
    """Start a requeued job, already PENDING, now rather than at its begin time (about two
    minutes), but never within the second its requeue ended the last allocation: slurmd
    compares credential times in whole seconds and kills a relaunch from that same second
    ("Killing non-startable batch JobId=...: Job credential revoked"), failing the job."""
    pending = int(time.time())
    while int(time.time()) <= pending:
        time.sleep(0.02)
    subprocess.run(
        ["scontrol", "update", f"jobid={job_id}", "StartTime=now"],
        env=env,
        capture_output=True,
        check=True,
        timeout=30,
    )


@pytest.fixture(scope="session")
def slurm_cluster() -> SlurmCluster:
    """The one-node SLURM cluster of tests/slurm/cluster.sh, found through SLURM_CONF. Absent,
    it skips the test, except where AUTOML_REQUIRE_SLURM=1 (CI): there absence fails it."""
    required = os.environ.get("AUTOML_REQUIRE_SLURM") == "1"
    conf = os.environ.get("SLURM_CONF", "")
    problem = ""
    if not conf:
        problem = "SLURM_CONF is not set"
    else:
        try:
            proc = subprocess.run(
                ["sinfo", "--noheader", "--format=%T"],
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                timeout=10,
                check=False,
            )
            if proc.returncode != 0:
                problem = f"sinfo failed: {(proc.stderr or proc.stdout).strip()}"
        except (OSError, subprocess.TimeoutExpired) as exc:
            problem = f"sinfo could not run: {exc}"
    if problem:
        message = f"no SLURM test cluster ({problem}); start one: see tests/slurm/README.md"
        if required:
            pytest.fail(f"AUTOML_REQUIRE_SLURM=1 but {message}", pytrace=False)
        pytest.skip(message)
    return SlurmCluster(Path(conf))


@pytest.fixture
def immutable() -> Iterator[Callable[[Path], None]]:
    """`chattr +i` a directory (undone afterwards): creating or removing entries in it fails
    with EPERM even for root. Skips where the file system has no immutable attribute."""
    marked: list[Path] = []

    def mark(path: Path) -> None:
        proc = subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False)
        if proc.returncode != 0:
            pytest.skip(f"chattr +i does not work here: {proc.stderr.decode().strip()}")
        marked.append(path)

    yield mark
    for path in reversed(marked):
        subprocess.run(["chattr", "-i", str(path)], check=True)
