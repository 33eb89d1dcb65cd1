"""The target environment under faults, races and bad input:
`--create-env` never removes what it did not create, concurrent creators of one new environment
leave exactly one verified install, a target that is not a Python interpreter (or is
automl-setup's own environment) is refused at the locate step, a killed `resolve` leaves no
temp dir, and a build that cannot download its build dependencies says so."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.cli import profile_args, run_cli
from support.engines import engine_marker, make_venv
from support.trees import tree_digest

from mcp_server.children.bound import Watch
from mcp_server.environment.target import TargetEnv
from mcp_server.errors import SetupError
from mcp_server.source.sourcerepo import SourceRepository
from mcp_server.source.wheelbuild import build_wheel

OWN_PREFIX = Path(sys.prefix)


def bogus_repository(tmp_path: Path) -> list[str]:
    """A repository that is never reached: these refusals come before the resolve step."""
    return ["--repository", (tmp_path / "never-read.git").as_uri()]


def git_shim(tmp_path: Path) -> Path:
    """A `git` first on PATH that, when its argv holds $SHIM_ON, writes $SHIM_TOUCH, then sleeps
    ($SHIM_SLEEP) or fails ($SHIM_FAIL); otherwise (and afterwards) it is the real git."""
    real = shutil.which("git")
    assert real
    shim_dir = tmp_path / "shim"
    shim_dir.mkdir(exist_ok=True)
    script = shim_dir / "git"
    script.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do\n'
        '  if [ "$a" = "$SHIM_ON" ]; then\n'
        '    if [ -n "$SHIM_TOUCH" ]; then mkdir -p "$(dirname "$SHIM_TOUCH")"; '
        'echo kept > "$SHIM_TOUCH"; fi\n'
        '    if [ -n "$SHIM_SLEEP" ]; then sleep "$SHIM_SLEEP"; fi\n'
        '    if [ -n "$SHIM_FAIL" ]; then echo "fatal: shim refuses" >&2; exit 128; fi\n'
        "  fi\n"
        "done\n"
        f'exec {real} "$@"\n'
    )
    script.chmod(0o755)
    return shim_dir


def shim_env(shim_dir: Path, **values: str) -> dict[str, str]:
    env = {"PATH": f"{shim_dir}{os.pathsep}{os.environ['PATH']}"}
    env.update({f"SHIM_{k.upper()}": v for k, v in values.items()})
    return env


# --------------------------------------------------------------------------------------------
# Class 1: --create-env never removes anything it did not create


def test_create_env_refuses_an_existing_folder_and_keeps_every_file(tmp_path: Path) -> None:
    folder = tmp_path / "project"
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "main.py").write_text("print('my work')\n")
    (folder / "notes.txt").write_text("not a venv\n")
    before = tree_digest(folder)
    cases = [
        (folder / "bin" / "python", ["--create-env"], 2, "not a virtual environment"),
        (folder, ["--create-env"], 2, "not a virtual environment"),
        (folder, [], 2, "not a virtual environment"),
        (folder / "bin" / "python", [], 3, "does not exist"),
    ]
    for target, create, code, text in cases:
        result = run_cli("install", "--branch", "main", "--python", str(target), *create,
                         *bogus_repository(tmp_path))  # fmt: skip
        assert result.code == code, result.output
        assert "locate environment:" in result.stderr and text in result.stderr
        assert "remedy:" in result.stderr
        assert tree_digest(folder) == before
        assert sorted(p.name for p in folder.iterdir()) == ["notes.txt", "src"]


def test_a_broken_venv_is_reported_and_left_alone(tmp_path: Path) -> None:
    venv = make_venv(tmp_path / "venv")
    (venv / "keep.txt").write_text("mine\n")
    # The base interpreter was removed: bin/python dangles (path.exists() is False for it).
    (venv / "bin" / "python").unlink()
    (venv / "bin" / "python").symlink_to(tmp_path / "removed-base" / "python3")
    before = tree_digest(venv)
    for target in (venv / "bin" / "python", venv):
        for create in (["--create-env"], []):
            result = run_cli("install", "--branch", "main", "--python", str(target), *create,
                             *bogus_repository(tmp_path))  # fmt: skip
            assert result.code == 1, result.output
            assert "locate environment:" in result.stderr
            assert "broken virtual environment" in result.stderr
            assert "removed-base" in result.stderr
            assert tree_digest(venv) == before
    verify = run_cli("verify", "--python", str(venv))
    assert verify.code == 1 and "broken virtual environment" in verify.stderr, verify.output
    assert tree_digest(venv) == before


def test_a_venv_whose_interpreter_runs_as_another_environment_is_refused(tmp_path: Path) -> None:
    """Without pyvenv.cfg, bin/python runs as its base Python: installing "into the venv" would
    write into the base Python's environment."""
    venv = make_venv(tmp_path / "venv")
    (venv / "pyvenv.cfg").unlink()
    base = Path(sys.base_prefix)
    base_state = os.path.lexists(base / ".automl-setup")
    before = tree_digest(venv)
    result = run_cli("install", "--branch", "main", "--python", str(venv), "--create-env",
                     *bogus_repository(tmp_path))  # fmt: skip
    assert result.code == 1, result.output
    assert "broken virtual environment" in result.stderr and "reports sys.prefix" in result.stderr
    assert tree_digest(venv) == before
    assert os.path.lexists(base / ".automl-setup") == base_state


def test_a_failed_create_env_removes_only_the_folders_it_made(tmp_path: Path) -> None:
    """Another process puts its own environment beside ours while our install fails: the
    cleanup removes our new env and no folder that is not empty, never the neighbour."""
    shim = git_shim(tmp_path)
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "mine.txt").write_text("mine\n")
    target = tmp_path / "keep" / "a" / "b" / "env"
    neighbour = tmp_path / "keep" / "a" / "b" / "other-env" / "pyvenv.cfg"
    result = run_cli(
        "install", "--branch", "main", "--python", str(target), "--create-env",
        "--repository", (tmp_path / "repo.git").as_uri(),
        env=shim_env(shim, on="ls-remote", touch=str(neighbour), fail="1"),
    )  # fmt: skip
    assert result.code == 1 and "resolve:" in result.stderr, result.output
    assert not target.exists()
    assert neighbour.read_text() == "kept\n"
    assert (tmp_path / "keep" / "mine.txt").read_text() == "mine\n"
    # With nothing beside it, every folder this call made is removed again.
    result = run_cli(
        "install", "--branch", "main", "--python", str(tmp_path / "keep" / "x" / "y" / "env"),
        "--create-env", "--repository", (tmp_path / "repo.git").as_uri(),
        env=shim_env(shim, on="ls-remote", fail="1"),
    )  # fmt: skip
    assert result.code == 1, result.output
    assert sorted(p.name for p in (tmp_path / "keep").iterdir()) == ["a", "mine.txt"]


# --------------------------------------------------------------------------------------------
# Class 2: concurrent creators of one new environment


@pytest.mark.slow
def test_concurrent_create_env_installs_leave_exactly_one_verified_engine(
    tmp_path: Path, source_repo: SourceRepository
) -> None:
    heads = {"main": source_repo.head("main"), "dev/next": source_repo.head("dev/next")}
    markers = {"main": "main-1", "dev/next": "dev-next-1"}
    clean = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    for round_no in range(8):
        target = tmp_path / f"round-{round_no}" / "env"  # the parent is new too
        first, second = ("main", "dev/next") if round_no % 2 else ("dev/next", "main")
        branches = [first, second, first]
        argv = [sys.executable, "-m", "mcp_server.faces.cli", "install", "--python", str(target)]
        argv += ["--create-env", *profile_args(source_repo)]
        procs = [
            subprocess.Popen(
                [*argv, "--branch", branch],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=clean,
            )
            for branch in branches
        ]
        outcomes = [
            (branch, *p.communicate(timeout=300), p.returncode)
            for branch, p in zip(branches, procs, strict=True)
        ]
        winners = [o for o in outcomes if o[3] == 0]
        assert len(winners) == 1, f"round {round_no}: {outcomes}"
        for _branch, _out, err, code in outcomes:
            if code != 0:
                assert code == 1, f"round {round_no}: {err}"
                assert "in use" in err or "concurrently" in err, f"round {round_no}: {err}"
        branch, out, _err, _code = winners[0]
        printed = re.search(r"commit:\s+([0-9a-f]{40})", out)
        assert printed and printed.group(1) == heads[branch], out
        record = json.loads((target / ".automl-setup" / "engine-record.json").read_text())
        assert record["source"]["commit"] == printed.group(1)
        verify = run_cli("verify", "--python", str(target), *profile_args(source_repo))
        assert verify.code == 0 and verify.stdout.startswith("verified:"), verify.output
        assert engine_marker(target) == markers[branch]


# --------------------------------------------------------------------------------------------
# Class 10: a target that is not a Python interpreter, or automl-setup's own environment


def test_a_target_that_is_not_python_is_refused_at_locate_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    relative = tmp_path / "relative-prefix"
    relative.write_text("#!/bin/sh\necho lib/python\n")
    relative.chmod(0o755)
    for target in ("/bin/true", "/bin/echo", str(relative)):
        for command in (["install", "--branch", "main", *bogus_repository(tmp_path)],
                        ["verify"], ["history"], ["repair"]):  # fmt: skip
            result = run_cli(command[0], "--python", target, *command[1:], cwd=cwd)
            assert result.code == 2, result.output
            assert "locate environment:" in result.stderr, result.output
            assert "not a Python interpreter" in result.stderr, result.output
            assert "does not build" not in result.stderr
            assert list(cwd.iterdir()) == [], target


PROBE_ANSWERS = [
    "",
    "[]",
    "null",
    "{}",
    '{"executable": 3}',
    "not json",
]


def test_a_probe_answer_of_the_wrong_shape_is_refused(tmp_path: Path) -> None:
    """An interpreter that runs but answers the probe with something else: every answer is
    checked for shape and types, never read with a KeyError waiting to happen."""
    venv = make_venv(tmp_path / "venv")
    answer = tmp_path / "answer.txt"
    fake = venv / "bin" / "python-fake"
    # Answers the locate step like Python (it is), the probe (its script, after -I -B) with
    # $answer.
    fake.write_text(
        "#!/bin/sh\n"
        f'case "$3" in */target_side/probe.py) cat {answer}; exit 0;; esac\n'
        f'exec {venv / "bin" / "python"} "$@"\n'
    )
    fake.chmod(0o755)
    good = TargetEnv(interpreter=venv / "bin" / "python", prefix=venv).probe(["pip"])
    assert good.prefix == venv
    env = TargetEnv(interpreter=fake, prefix=venv)
    wrong_type = {
        "executable": str(fake), "prefix": str(venv), "base_prefix": "/usr",
        "purelib": str(venv), "scripts": str(venv), "python_version": 3,
        "implementation": "CPython", "platform": "linux", "dists": {}, "modules": {},
        "versions": {}, "torch_cuda": None,
    }  # fmt: skip
    for text in [*PROBE_ANSWERS, json.dumps(wrong_type)]:
        answer.write_text(text + "\n")
        with pytest.raises(SetupError) as refused:
            env.probe(["automl-refengine"])
        assert refused.value.step == "inspect environment", text
        assert "not a Python interpreter" in refused.value.cause, text
    answer.write_text('{"executable": 3}\n')
    result = run_cli("verify", "--python", str(fake))
    assert result.code == 1, result.output
    assert "inspect environment:" in result.stderr and "unexpected" not in result.stderr


def own_state() -> tuple[bool, list[str]]:
    site = Path(next(p for p in sys.path if p.endswith("site-packages")))
    return os.path.lexists(OWN_PREFIX / ".automl-setup"), sorted(os.listdir(site))


def test_automl_setups_own_environment_is_refused_as_an_install_target(tmp_path: Path) -> None:
    before = own_state()
    assert not before[0], "the tool's own environment already holds automl-setup state"
    attempts = [
        (["install", "--branch", "main", "--python", str(OWN_PREFIX)], {}),
        (["install", "--branch", "main", "--python", sys.executable], {}),
        (["install", "--branch", "main", "--create-env", "--python", str(OWN_PREFIX)], {}),
        (["install", "--branch", "main"], {"VIRTUAL_ENV": str(OWN_PREFIX)}),
        (["repair", "--python", str(OWN_PREFIX)], {}),
    ]
    for args, env in attempts:
        result = run_cli(*args, *(bogus_repository(tmp_path) if args[0] == "install" else []),
                         env=env)  # fmt: skip
        assert result.code == 2, result.output
        assert "locate environment:" in result.stderr
        assert "automl-setup's own environment" in result.stderr
        assert "pass --python of a separate venv" in result.stderr
        assert own_state() == before
    # Reading is allowed (nothing is written): verify reports no engine, and creates nothing.
    verify = run_cli("verify", "--python", str(OWN_PREFIX))
    assert "own environment" not in verify.stderr and "no-engine" in verify.stdout, verify.output
    assert own_state() == before


# --------------------------------------------------------------------------------------------
# Class 16: a killed resolve leaves no temp dir; a network failure in build says so


def killed_resolve(tmp_path: Path, repo_url: str, on: str, tmpdir: Path) -> None:
    """Start `automl-setup resolve` with git sleeping at `on`, SIGKILL it there."""
    marker = tmp_path / f"reached-{on}"
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env.update(shim_env(git_shim(tmp_path), on=on, touch=str(marker), sleep="60"))
    env["TMPDIR"] = str(tmpdir)
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcp_server.faces.cli", "resolve", "--branch", "main",
         "--repository", repo_url],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env=env, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert proc.poll() is None, f"resolve exited ({proc.returncode}) before git {on}"
        assert time.monotonic() < deadline, f"resolve never reached git {on}"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    marker.unlink()


def test_a_killed_resolve_leaves_no_temp_dir(tmp_path: Path, source_repo: SourceRepository) -> None:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    killed_resolve(tmp_path, source_repo.url, "check-ref-format", tmpdir)
    assert [p.name for p in tmpdir.iterdir() if p.name.startswith("automl-setup-ref-")]
    killed_resolve(tmp_path, source_repo.url, "ls-remote", tmpdir)
    assert [p.name for p in tmpdir.iterdir() if p.name.startswith("automl-setup-resolve-")]
    result = run_cli("resolve", "--branch", "main", "--repository", source_repo.url,
                     env={"TMPDIR": str(tmpdir)})  # fmt: skip
    assert result.code == 0 and source_repo.head("main") in result.stdout, result.output
    assert list(tmpdir.iterdir()) == []


def test_a_build_that_cannot_download_its_backend_blames_the_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "src"
    (source / "pkg").mkdir(parents=True)
    (source / "pkg" / "__init__.py").write_text("")
    (source / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
        '[project]\nname = "pkg"\nversion = "0.1"\n'
    )
    # A closed local port: the build requirements cannot be fetched (a connection error), and
    # an empty cache cannot satisfy them either.
    monkeypatch.setenv("UV_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")
    monkeypatch.setenv("UV_NO_CONFIG", "1")
    monkeypatch.delenv("UV_OFFLINE", raising=False)
    with pytest.raises(SetupError) as refused:
        build_wheel(source, tmp_path / "dist", 0, sys.executable, tmp_path / "build.log", Watch())
    error = refused.value
    assert error.step == "build"
    assert "could not download its build dependencies" in error.cause
    assert "network" in error.remedy
    assert "does not build" not in error.message
    assert any("Connection refused" in line for line in error.details)
