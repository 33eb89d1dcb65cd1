"""Shared fixtures: real git repositories built from the reference engine, real venvs, and the
real command line run as a subprocess."""

from __future__ import annotations

import compileall
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.agent_clients import CLIENTS_ENV, REQUIRE_ENV, Clients, client_dir
from support.cli import REPO_ROOT
from support.engines import (
    WheelInstall,
    checkout_copy,
    install_main,
    make_venv,
    new_source_repo,
)
from support.experiments import Experiment, Reaper, make_interrupted, subreaper
from support.slurm_cluster import SlurmCluster
from support.trees import env_snapshot, tree_digest

from mcp_server.children.uv import uv_binary
from mcp_server.environment.wheelstore import STORE_ENV
from mcp_server.experiments.snapshot import CACHE_ENV
from mcp_server.source.sourcerepo import SourceRepository

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
    "test_track.py",
    "test_index.py",
    "test_plugin_from_git.py",
    "test_stalls.py",
    "test_resume.py",
    "test_install_from_source.py",
    "test_launch_and_status.py",
    "test_binding_under_faults.py",
    "test_install_killed_then_repaired.py",
    "test_closure_exact.py",
    "test_sft_demo.py",
    "test_target_under_faults.py",
    "test_records_under_faults.py",
    "test_skills_ci.py",
    "test_slurm_controller.py",
    "test_mcp_tools.py",
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


def _session_folder(variable: str, root: Path) -> Iterator[Path]:
    """`variable` names `root` for the session (the CLI subprocesses inherit it), then is put
    back as it was."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(variable, str(root))
        yield root


@pytest.fixture(scope="session", autouse=True)
def wheel_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every install keeps its wheel in the store: the session's own, never the user's cache."""
    yield from _session_folder(STORE_ENV, tmp_path_factory.mktemp("wheel-store"))


@pytest.fixture(scope="session", autouse=True)
def status_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The status snapshots of every list and status: the session's own folder, never the
    user's cache."""
    yield from _session_folder(CACHE_ENV, tmp_path_factory.mktemp("status-cache"))


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


@pytest.fixture(scope="session")
def wheel_install(tmp_path_factory: pytest.TempPathFactory) -> WheelInstall:
    root = tmp_path_factory.mktemp("from-wheel")
    uv = uv_binary()
    # From a copy: a build rewrites mcp_server/_version.py in the tree it builds, which every
    # CLI process of the other workers imports from this checkout meanwhile.
    source = checkout_copy(root / "source")
    build = [uv, "build", "--wheel", "--quiet", "--out-dir", str(root / "dist"), str(source)]
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


@pytest.fixture(name="reaper")
def reaper_fixture() -> Iterator[Reaper]:
    yield from subreaper()


@pytest.fixture(name="interrupted")
def interrupted_fixture(tmp_path: Path, installed_env: Path, reaper: Reaper) -> Experiment:
    """An experiment launched on the `main` build and stopped by SIGTERM after one trial."""
    return make_interrupted(tmp_path, installed_env, reaper)


@pytest.fixture
def clients(tmp_path: Path) -> Clients:
    """The real agent clients, Claude Code and Codex, with HOME in the test's folder. Skipped,
    saying why, when they are not installed; failed instead where AUTOML_REQUIRE_AGENT_CLIENTS
    is set (CI)."""
    folder = client_dir()
    if folder is None:
        why = f"the agent clients are not installed (set {CLIENTS_ENV}; .ci/run installs them)"
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(why)
        pytest.skip(why)
    home = tmp_path / "home"
    home.mkdir()
    return Clients(folder, home)
