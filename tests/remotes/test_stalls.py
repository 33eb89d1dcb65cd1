"""A server that stops answering is given up on after the stall bound, never waited on for
git's 300 s or ssh's forever: at resolve, mid-fetch and in uv's fetch of a dependency, over
https and ssh, through the command line and the MCP face, with what it waited on said while it
waits and nothing left behind; a slow but moving transfer is never cut off."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from support.cli import run_cli
from support.closure import IDX, package
from support.engines import engine_marker, install_main, site_packages
from support.install_process import Install
from support.mcp import ProgressLog
from support.remotes import (
    DEPENDENCY,
    HttpsGitServer,
    PrivateEngine,
    SshServer,
    StallingServer,
    install_private,
    refusal_lines,
    scratch_left,
)

from mcp_server.children.uv import uv_binary
from mcp_server.source.sourcerepo import SourceRepository

Start = Callable[..., StallingServer]


def _resolve(engine: PrivateEngine, url: str, *flags: str, cwd: Path | None = None) -> tuple:
    started = time.monotonic()
    result = run_cli(
        "resolve", "--branch", "main", *engine.profile(url), *flags,
        env=engine.env(), whole_env=True, cwd=cwd,
    )  # fmt: skip
    return result, time.monotonic() - started


@pytest.mark.parametrize("transport", ["https", "ssh"])
def test_a_silent_server_is_given_up_on_at_the_bound(
    transport: str, https_engine: PrivateEngine, stalling_server: Start
) -> None:
    silent = stalling_server("silent")
    url = (
        f"https://127.0.0.1:{silent.port}/git/engine.git"
        if transport == "https"
        else f"ssh://root@127.0.0.1:{silent.port}/srv/engine.git"
    )
    result, took = _resolve(https_engine, url, "--stall-timeout", "2")
    assert result.code == 1, result.output
    assert took < 12, took  # 2 s without progress, the CLI's start and the sampling
    first, remedy, _ = refusal_lines(result.stderr)
    assert first.startswith(f"error: resolve: 127.0.0.1:{silent.port} stopped answering: "), first
    assert f"waiting on 127.0.0.1:{silent.port} (established" in first
    assert "nothing had arrived on it" in first
    assert "--stall-timeout, now 2 s" in remedy
    assert silent.connections == 1


def test_what_it_waits_on_is_said_while_it_waits(
    https_engine: PrivateEngine, stalling_server: Start
) -> None:
    silent = stalling_server("silent")
    url = f"https://127.0.0.1:{silent.port}/git/engine.git"
    result, _took = _resolve(https_engine, url, "--stall-timeout", "7")
    assert result.code == 1, result.output
    waiting = [line for line in result.stderr.splitlines() if line.startswith("[resolve] ")]
    assert any(
        f"no progress for 5 s, waiting on 127.0.0.1:{silent.port}" in line
        and "giving up at 7 s" in line
        for line in waiting
    ), result.stderr


def test_the_project_files_bound(
    https_engine: PrivateEngine, stalling_server: Start, tmp_path: Path
) -> None:
    silent = stalling_server("silent")
    project = tmp_path / "project"
    project.mkdir()
    (project / "automl-setup.toml").write_text("stall-timeout = 2\n")
    url = f"https://127.0.0.1:{silent.port}/git/engine.git"
    result, took = _resolve(https_engine, url, cwd=project)
    assert result.code == 1 and "now 2 s" in result.stderr, result.output
    assert took < 12
    shown = run_cli("config", "show", cwd=project, env=https_engine.env(), whole_env=True)
    assert "stall timeout: 2.0 s" in shown.stdout, shown.output


@pytest.mark.anyio
async def test_the_mcp_face_says_what_it_waits_on_and_gives_up(
    https_engine: PrivateEngine, stalling_server: Start, tmp_path: Path
) -> None:
    silent = stalling_server("silent")
    server = StdioServerParameters(
        command=str(Path(sys.executable).with_name("automl-setup-mcp")),
        env=https_engine.env(),
        cwd=str(tmp_path),
    )
    engine = {
        "repository": f"https://127.0.0.1:{silent.port}/git/engine.git",
        "subdirectory": https_engine.engine.subdirectory,
        "distribution": "automl-refengine",
    }
    progress = ProgressLog()
    with (tmp_path / "server.log").open("w") as errlog:
        async with Client(stdio_client(server, errlog=errlog)) as client:
            result = await client.call_tool(
                "resolve_branch",
                {"branch": "main", "profile": engine, "stall_timeout": 7},
                progress_callback=progress,
            )
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert f"resolve: 127.0.0.1:{silent.port} stopped answering" in text, text
    assert any(f"waiting on 127.0.0.1:{silent.port}" in message for message in progress.messages), (
        progress.messages
    )
    assert progress.strictly_increasing()


def _proxied_https(engine: PrivateEngine, server: HttpsGitServer, port: int) -> str:
    """The engine's URL through a proxy on `port`, the token stored for that port too."""
    store = engine.client.home / ".git-credentials"
    store.write_text(f"{server.credential_url()}\n{server.credential_url(port=port)}\n")
    return engine.url.replace(f":{server.port}/", f":{port}/")


@pytest.mark.parametrize("transport", ["https", "ssh"])
def test_a_transfer_that_stops_midway_is_given_up_on_and_leaves_nothing(
    transport: str,
    request: pytest.FixtureRequest,
    stalling_server: Start,
    tmp_path: Path,
) -> None:
    """The server sends the first 20 KB of a ~65 KB fetch, then nothing: the fetch is given up
    on, saying what had arrived; the new environment and the scratch folders are gone."""
    if transport == "https":
        engine: PrivateEngine = request.getfixturevalue("https_engine")
        server: HttpsGitServer = request.getfixturevalue("https_server")
        cut = stalling_server("cut", upstream=("127.0.0.1", server.port), cut_after=20_000)
        url = _proxied_https(engine, server, cut.port)
    else:
        engine = request.getfixturevalue("ssh_engine")
        sshd: SshServer = request.getfixturevalue("ssh_server")
        cut = stalling_server("cut", upstream=("127.0.0.1", sshd.port), cut_after=20_000)
        engine.client.trust_host(sshd.host_key_line(port=cut.port))
        url = sshd.url(engine.engine.bare, port=cut.port)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    target = tmp_path / "env"
    result = run_cli(
        "install", "--commit", engine.engine.head("main"), "--python", str(target),
        "--create-env", "--stall-timeout", "2", *engine.profile(url),
        env=engine.env(TMPDIR=str(scratch)), whole_env=True,
    )  # fmt: skip
    assert result.code == 1, result.output
    first, _remedy, _ = refusal_lines(result.stderr)
    assert first.startswith(f"error: fetch: 127.0.0.1:{cut.port} stopped answering"), first
    assert "had arrived on it before it went quiet" in first, first
    assert cut.bytes_down == 20_000
    assert not target.exists()
    assert scratch_left(scratch) == []


@pytest.mark.slow
def test_a_slow_but_moving_transfer_is_never_cut_off(
    https_engine: PrivateEngine, https_server: HttpsGitServer, stalling_server: Start,
    tmp_path: Path,
) -> None:  # fmt: skip
    slow = stalling_server(
        "throttle", upstream=("127.0.0.1", https_server.port), chunk=1024, interval=0.1
    )
    url = _proxied_https(https_engine, https_server, slow.port)
    started = time.monotonic()
    result = run_cli(
        "install", "--commit", https_engine.engine.head("main"), "--python",
        str(tmp_path / "env"), "--create-env", "--stall-timeout", "2",
        *https_engine.profile(url), env=https_engine.env(), whole_env=True,
    )  # fmt: skip
    took = time.monotonic() - started
    assert result.code == 0, result.output
    assert slow.bytes_down > 50_000
    assert took > 2 * 2, took  # the transfer alone outlasted the bound twice over
    assert engine_marker(tmp_path / "env") == "private-main"


@pytest.mark.slow
def test_a_dependency_fetch_that_stalls_is_given_up_on(
    https_engine: PrivateEngine, stalling_server: Start, tmp_path: Path
) -> None:
    """uv's git waits on a silent server for the engine's private dependency (uv sets no
    limit of its own): the install gives up at the bound, names the peer, leaves nothing."""
    silent = stalling_server("silent")
    engine = https_engine.engine
    engine.commit_engine(
        "dev/stalled-dep", base="main", marker="stalled",
        dependencies=[f"{DEPENDENCY} @ git+https://127.0.0.1:{silent.port}/git/privdep.git"],
    )  # fmt: skip
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    target = tmp_path / "env"
    started = time.monotonic()
    result = install_private(
        https_engine, target, "--stall-timeout", "3", branch="dev/stalled-dep",
        env=https_engine.env(TMPDIR=str(scratch)),
    )  # fmt: skip
    assert result.code == 1, result.output
    assert time.monotonic() - started < 40
    first, _remedy, _ = refusal_lines(result.stderr)
    assert first.startswith(f"error: install: 127.0.0.1:{silent.port} stopped answering"), first
    assert "git-remote-https" in first
    assert not target.exists()
    assert scratch_left(scratch) == []


@pytest.fixture
def index_versions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A find-links folder with a package at 1.0 and at 2.0 (every CLI process inherits it)."""
    links = tmp_path / "find-links"
    links.mkdir()
    for version in ("1.0", "2.0"):
        project = package(tmp_path / f"idx-{version}", IDX, version, [], version)
        argv = [uv_binary(), "build", "--wheel", "--quiet", "--out-dir", str(links)]
        subprocess.run([*argv, str(project)], check=True, capture_output=True)
    monkeypatch.setenv("UV_FIND_LINKS", str(links))
    return links


@pytest.mark.slow
def test_a_repair_whose_index_stalls_is_given_up_on_at_its_bound(
    index_versions: Path, stalling_server: Start, tmp_path: Path
) -> None:
    """An install of an engine that moves a dependency from 1.0 to 2.0 is killed once uv has
    installed it; repair must put 1.0 back with uv, from an index that accepts and never
    answers: given up on at the bound repair was given, naming the peer and that bound, the
    journal kept; a repair that can reach the package then finishes the rollback."""
    repo = SourceRepository(tmp_path / "repo")
    repo.commit_engine("main", marker="main-1", dependencies=[f"{IDX}==1.0"])
    repo.commit_engine("dev/next", base="main", marker="dev-next-1", dependencies=[f"{IDX}==2.0"])
    env_dir = install_main(tmp_path / "env", repo)
    run = Install(repo, env_dir, tmp_path, pause_at="uv-installed")
    run.wait_paused("uv-installed")
    run.kill()
    assert _version(env_dir) == "2.0"
    journal = env_dir / ".automl-setup" / "journal.json"
    kept = journal.read_bytes()

    silent = stalling_server("silent")
    empty = tmp_path / "empty-links"
    empty.mkdir()
    unreachable = {  # only the silent index holds the package: no find-links, no cache
        "UV_INDEX_URL": f"http://127.0.0.1:{silent.port}/simple",
        "UV_FIND_LINKS": str(empty),
        "UV_CACHE_DIR": str(tmp_path / "empty-cache"),
        "TMPDIR": str(run.tmpdir),
    }
    started = time.monotonic()
    refused = run_cli("repair", "--python", str(env_dir), "--stall-timeout", "3", env=unreachable)
    took = time.monotonic() - started
    assert refused.code == 1, refused.output
    assert took < 20, took  # uv's own read timeout is 30 s: the bound given was the one held
    first, remedy, _ = refusal_lines(refused.stderr)
    assert first.startswith("error: rollback: the rollback failed"), first
    assert f"rollback: 127.0.0.1:{silent.port} stopped answering: no progress for" in first
    assert "--stall-timeout, now 3 s" in remedy, remedy
    assert f"then run automl-setup repair --python {env_dir}" in remedy, remedy
    assert silent.connections >= 1
    assert journal.read_bytes() == kept  # the journal stays for the next repair
    assert _version(env_dir) == "2.0"  # uv was stopped before it changed anything

    done = run_cli("repair", "--python", str(env_dir), env={"TMPDIR": str(run.tmpdir)})
    assert done.code == 0, done.output
    assert "was rolled back; the previous engine is restored" in done.stdout
    assert not journal.exists()
    assert _version(env_dir) == "1.0"
    assert engine_marker(env_dir) == "main-1"


def _version(env_dir: Path) -> str:
    found = list(site_packages(env_dir).glob(f"{IDX.replace('-', '_')}-*.dist-info"))
    assert len(found) == 1, found
    return found[0].name.removesuffix(".dist-info").rsplit("-", 1)[1]
