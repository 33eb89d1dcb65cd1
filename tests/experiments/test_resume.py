"""Resume: real interruptions (SIGTERM, SIGKILL of the engine's process group) resumed to the
same end as an uninterrupted run; twenty concurrent resumes; and every refusal, each checked
twice: the message and exit code, and that nothing changed but one `refused` attempt line."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import profile_args, run_cli
from support.engines import engine_marker
from support.experiments import (
    EXP,
    Experiment,
    Reaper,
    assert_refused_once,
    freeze,
    installed_file,
    interrupt,
    launch_detached,
    make_interrupted,
    plain_engine_env,
    wait_for,
    write_manifest,
)
from support.refengine import holding
from support.trees import env_snapshot, tree_digest

from mcp_server.source.sourcerepo import SourceRepository

EQUIVALENCE = {"seed": 11, "max_trials": 5, "sleep": 0.3}


def baseline(tmp_path: Path, env: Path) -> Experiment:
    """The same manifest run uninterrupted, in the foreground, in another workspace."""
    exp = Experiment(
        write_manifest(tmp_path / "manifest.yaml", **EQUIVALENCE), tmp_path / "base-ws", env
    )
    result = exp.cli("launch")
    assert result.code == 0, result.output
    return exp


def assert_same_end(resumed: Experiment, uninterrupted: Experiment) -> None:
    mine, theirs = resumed.status(), uninterrupted.status()
    assert mine["state"] == theirs["state"] == "completed"
    assert mine["trials_done"] == theirs["trials_done"] == EQUIVALENCE["max_trials"]
    assert mine["best"] == theirs["best"]
    assert resumed.finished_trials() == uninterrupted.finished_trials()


# --------------------------------------------------------------------------------------------
# Interrupt and resume to completion


@pytest.mark.slow
def test_sigterm_then_resume_ends_like_an_uninterrupted_run(
    tmp_path: Path, installed_env: Path, reaper: Reaper
) -> None:
    hold = tmp_path / "hold"
    manifest = write_manifest(tmp_path / "manifest.yaml", hold=hold, **EQUIVALENCE)
    exp = Experiment(manifest, tmp_path / "ws", installed_env)
    with holding(hold, 2):  # the third trial cannot end first: SIGTERM lands mid-run
        pid = launch_detached(exp, reaper)
        interrupt(exp, reaper, pid, after_trials=2)  # the engine saved its state and exited 143
    stopped = exp.status()
    assert stopped["state"] == "interrupted"
    assert 2 <= stopped["trials_done"] < EQUIVALENCE["max_trials"]
    assert exp.engine_events("session_ended")[-1]["signal"] == "SIGTERM"

    result = exp.cli("resume", "--json")

    assert result.code == 0, result.output
    resumed = json.loads(result.stdout)
    assert resumed["action"] == "resume" and resumed["exit_code"] == 0
    assert_same_end(exp, baseline(tmp_path, installed_env))
    assert [(a["action"], a["outcome"], a["exit_code"]) for a in exp.attempts()] == [
        ("launch", "accepted", None),
        ("resume", "accepted", None),
        ("exit", "exited", 0),
    ]


@pytest.mark.slow
def test_sigkill_of_the_engine_group_then_resume_ends_like_an_uninterrupted_run(
    tmp_path: Path, installed_env: Path, reaper: Reaper
) -> None:
    hold = tmp_path / "hold"
    manifest = write_manifest(tmp_path / "manifest.yaml", hold=hold, **EQUIVALENCE)
    exp = Experiment(manifest, tmp_path / "ws", installed_env)

    def trial_in_flight() -> bool:
        return exp.trials_done() >= 1 and exp.engine_events()[-1]["event"] == "trial_started"

    with holding(hold, 1):  # the second trial stays in flight until the group is killed
        pid = launch_detached(exp, reaper)
        assert os.getpgid(pid) == pid == os.getsid(pid)  # detached: its own session and group
        wait_for("a trial in flight after the first finished", trial_in_flight)
        orphan = exp.engine_events("trial_started")[-1]
        os.killpg(pid, signal.SIGKILL)
        assert reaper.reap(pid) == -signal.SIGKILL
    # The trial runs in its own group, so it outlives its controller; it is adopted by the
    # test (subreaper) and, released, finishes its sleep. The engine refuses to resume while
    # it lives.
    reaper.adopt(orphan["pgid"])
    reaper.reap(orphan["pgid"])
    killed = exp.status()
    assert killed["state"] == "interrupted"
    assert killed["controller_running"] is False

    result = exp.cli("resume")

    assert result.code == 0, result.output
    reconciled = exp.engine_events("trial_interrupted")
    assert [(e["index"], e["reason"]) for e in reconciled] == [(orphan["index"], "reconciled")]
    assert_same_end(exp, baseline(tmp_path, installed_env))
    assert [(a["action"], a["outcome"]) for a in exp.attempts()] == [
        ("launch", "accepted"),
        ("resume", "accepted"),
        ("exit", "exited"),
    ]


# --------------------------------------------------------------------------------------------
# Twenty concurrent resumes


CONCURRENT = 20


def concurrent_resumes(exp: Experiment, count: int, *extra: str) -> list[tuple[int, str, str]]:
    """Start `count` `automl-setup resume` processes at once, then wait for all of them."""
    argv = [sys.executable, "-m", "mcp_server.faces.cli", "resume", "--experiment-id", EXP]
    argv += ["--workspace", str(exp.workspace), "--manifest", str(exp.manifest)]
    argv += ["--python", str(exp.env), *extra]
    clean = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}

    def start() -> subprocess.Popen[str]:
        return subprocess.Popen(
            argv, env=clean, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    procs = [start() for _ in range(count)]
    outputs = [p.communicate(timeout=180) for p in procs]
    return [(p.returncode, out, err) for p, (out, err) in zip(procs, outputs, strict=True)]


@pytest.mark.slow
def test_twenty_concurrent_resumes_exactly_one_proceeds(
    tmp_path: Path, installed_env: Path, reaper: Reaper
) -> None:
    exp = make_interrupted(tmp_path, installed_env, reaper, max_trials=8, sleep=0.2)
    assert exp.hold is not None
    lines_before = len(exp.attempts())

    # The winner's engine holds its first trial (the re-run of trial 1) until all twenty have
    # answered, so a late loser always finds the lock taken, however slow the machine.
    with holding(exp.hold, 1):
        outputs = concurrent_resumes(exp, CONCURRENT, "--detach", "--json")

        winners = [out for code, out, _err in outputs if code == 0]
        losers = [(code, err) for code, _out, err in outputs if code != 0]
        assert len(winners) == 1, [(code, err[-300:]) for code, _o, err in outputs]
        assert len(losers) == CONCURRENT - 1
        for code, err in losers:
            assert code == 1, err
            assert f"another controller holds the lock of experiment {EXP}" in err
        pid = reaper.adopt(json.loads(winners[0])["pid"])
        # The premise: the winner's engine was still running when the last loser gave up.
        assert os.waitpid(pid, os.WNOHANG) == (0, 0), "the engine ended before all 20 tried"

        new = exp.attempts()[lines_before:]
        assert len(new) == CONCURRENT
        assert {a["action"] for a in new} == {"resume"}
        accepted = [a for a in new if a["outcome"] == "accepted"]
        refused = [a for a in new if a["outcome"] == "refused"]
        assert len(accepted) == 1 and accepted[0]["pid"] == pid
        assert len(refused) == CONCURRENT - 1
        assert all("another controller holds the lock" in a["reason"] for a in refused)

    assert reaper.reap(pid, timeout=120) == 0
    status = exp.status()
    assert status["state"] == "completed" and status["trials_done"] == 8
    assert [i for i, _p, _v in exp.finished_trials()] == list(range(8))
    assert len(exp.engine_events("session_started")) == 2  # run, then exactly one resume


HISTORY = 20_000


@pytest.mark.slow
def test_concurrent_refusals_get_distinct_attempt_numbers(
    tmp_path: Path, installed_env: Path, reaper: Reaper
) -> None:
    exp = Experiment(
        write_manifest(tmp_path / "manifest.yaml", max_trials=1, sleep=120.0),
        tmp_path / "ws",
        installed_env,
    )
    pid = launch_detached(exp, reaper)
    # A long-lived experiment: 20,000 earlier refusals, in the ledger's own format.
    (first,) = exp.attempts()
    earlier = {
        "time": first["time"], "action": "resume", "outcome": "refused", "host": first["host"],
        "pid": None, "exit_code": None, "environment": None, "identity_digest": None,
        "reason": "lock: another controller holds the lock", "differences": [], "log": None,
    }  # fmt: skip
    lines = (
        json.dumps({**earlier, "attempt": n}, sort_keys=True, separators=(",", ":")) + "\n"
        for n in range(2, HISTORY + 2)
    )
    with exp.attempts_path.open("a", encoding="utf-8") as ledger:
        ledger.writelines(lines)

    outputs = concurrent_resumes(exp, CONCURRENT)
    os.kill(pid, signal.SIGTERM)
    assert reaper.reap(pid) == 143

    assert [code for code, _out, _err in outputs] == [1] * CONCURRENT
    numbers = [a["attempt"] for a in exp.attempts()]
    assert len(numbers) == 1 + HISTORY + CONCURRENT  # launch, history, the 20 refusals
    assert numbers == list(range(1, len(numbers) + 1))


# --------------------------------------------------------------------------------------------
# Refusals: the message and exit code, and nothing changed but one refused attempt line


@pytest.mark.slow
def test_resume_refused_when_the_binding_is_missing(
    interrupted: Experiment, installed_env: Path
) -> None:
    interrupted.binding.unlink()
    before = freeze(interrupted, installed_env)

    result = interrupted.cli("resume")

    assert result.code == 1, result.output
    assert f"experiment {EXP} has no binding ({interrupted.binding} is missing)" in result.stderr
    assert_refused_once(interrupted, before, installed_env, reason="has no binding")
    assert not interrupted.binding.exists()


@pytest.mark.slow
def test_resume_refused_when_the_binding_is_corrupt(
    interrupted: Experiment, installed_env: Path
) -> None:
    data = interrupted.binding.read_bytes()
    interrupted.binding.write_bytes(data[: len(data) // 2])
    before = freeze(interrupted, installed_env)

    result = interrupted.cli("resume")

    assert result.code == 1, result.output
    assert f"{interrupted.binding} is not a valid binding" in result.stderr
    assert "bindings are never rewritten" in result.stderr
    assert_refused_once(interrupted, before, installed_env, reason="is not a valid binding")


@pytest.mark.slow
def test_resume_refused_when_the_manifest_differs(
    interrupted: Experiment, installed_env: Path
) -> None:
    text = interrupted.manifest.read_text()
    interrupted.manifest.write_text(text.replace("seed: 5", "seed: 6"))
    assert interrupted.manifest.read_text() != text
    before = freeze(interrupted, installed_env)

    result = interrupted.cli("resume")

    assert result.code == 1, result.output
    assert f"the manifest {interrupted.manifest} is not the one experiment {EXP}" in result.stderr
    assert "manifest_sha256: recorded" in result.stderr
    entry = assert_refused_once(
        interrupted, before, installed_env, reason="is not the one", fields=("manifest_sha256",)
    )
    binding = json.loads(interrupted.binding.read_bytes())
    assert entry["differences"][0]["recorded"] == binding["manifest_sha256"]


def recreate_commands(binding: dict[str, object], manifest: Path) -> list[str]:
    """The commands a refusal must print, spelled out from the binding."""
    engine = binding["engine"]
    assert isinstance(engine, dict)
    new_env = f"{engine['environment_path']}-{engine['build']['wheel_sha256'][:12]}"
    install = ["automl-setup", "recreate", "--experiment-id", EXP]
    install += ["--workspace", str(binding["workspace"]), "--python", new_env, "--create-env"]
    resume = ["automl-setup", "resume", "--experiment-id", EXP]
    resume += ["--workspace", str(binding["workspace"]), "--manifest", str(manifest)]
    resume += ["--python", new_env]
    return [shlex.join(install), shlex.join(resume)]


def install_dev(source_repo: SourceRepository, env: Path) -> None:
    result = run_cli(
        "install", "--branch", "dev/next", "--python", str(env), "--create-env",
        *profile_args(source_repo),
    )  # fmt: skip
    assert result.code == 0, result.output


@pytest.mark.slow
def test_resume_refused_on_another_build_names_fields_and_the_recreate_commands(
    tmp_path: Path, source_repo: SourceRepository, installed_env: Path, interrupted: Experiment
) -> None:
    dev_env = tmp_path / "env-dev"
    install_dev(source_repo, dev_env)
    before = freeze(interrupted, installed_env, dev_env)
    main, dev = source_repo.head("main"), source_repo.head("dev/next")

    result = interrupted.cli("resume", "--python", str(dev_env))

    assert result.code == 1, result.output
    assert f"the engine in {dev_env} is not the build experiment {EXP} is bound to" in result.stderr
    assert f"source.commit: recorded {main}, found {dev}" in result.stderr
    for field in ("source.subtree_id", "build.wheel_sha256", "build.record_digest"):
        assert f"- {field}: recorded " in result.stderr
    binding = json.loads(interrupted.binding.read_bytes())
    commands = recreate_commands(binding, interrupted.manifest)
    assert commands[0].startswith(f"automl-setup recreate --experiment-id {EXP} ")
    shown = [line.strip() for line in result.stderr.splitlines()]
    assert commands[0] in shown and commands[1] in shown
    entry = assert_refused_once(
        interrupted, before, installed_env, dev_env, reason="is not the build",
        fields=("source.commit", "source.subtree_id", "build.wheel_sha256"),
    )  # fmt: skip
    commit_diff = next(d for d in entry["differences"] if d["field"] == "source.commit")
    assert (commit_diff["recorded"], commit_diff["found"]) == (main, dev)
    assert engine_marker(dev_env) == "dev-next-1"  # resume swapped nothing

    # The printed commands do what they say: rebuild the bound engine elsewhere, resume there.
    for command in commands:
        done = run_cli(*shlex.split(command)[1:])
        assert done.code == 0, done.output
    new_env = Path(shlex.split(commands[0])[-2])
    assert engine_marker(new_env) == "main-1"
    assert interrupted.status()["state"] == "completed"
    assert interrupted.status()["trials_done"] == 4


@pytest.mark.slow
def test_resume_in_a_recreated_environment_binds_the_experiment_to_it(
    tmp_path: Path, source_repo: SourceRepository, installed_env: Path, reaper: Reaper
) -> None:
    """Rule 5 holds in the environment an experiment was resumed in, not only launched in."""
    exp = make_interrupted(tmp_path, installed_env, reaper, max_trials=6, sleep=0.3)
    binding = json.loads(exp.binding.read_bytes())
    install_cmd, _resume_cmd = recreate_commands(binding, exp.manifest)
    assert run_cli(*shlex.split(install_cmd)[1:]).code == 0
    new_env = Path(shlex.split(install_cmd)[-2])
    assert exp.hold is not None
    exp_there = Experiment(exp.manifest, exp.workspace, new_env, hold=exp.hold)
    after = exp.trials_done() + 1
    # One more trial finishes there; the next cannot, so SIGTERM surely lands mid-run.
    with holding(exp.hold, after):
        pid = launch_detached_resume(exp_there, reaper)
        interrupt(exp_there, reaper, pid, after_trials=after)
    assert exp_there.status()["state"] == "interrupted"

    before = env_snapshot(new_env)
    result = run_cli(
        "install", "--branch", "dev/next", "--python", str(new_env), *profile_args(source_repo)
    )
    assert result.code == 1, result.output
    assert f"unfinished experiments are bound to the engine in {new_env}" in result.stderr
    assert f"{EXP} ({exp.workspace})" in result.stderr
    assert env_snapshot(new_env) == before
    assert engine_marker(new_env) == "main-1"


def launch_detached_resume(exp: Experiment, reaper: Reaper) -> int:
    result = exp.cli("resume", "--detach", "--json")
    assert result.code == 0, result.output
    return reaper.adopt(json.loads(result.stdout)["pid"])


@pytest.mark.slow
def test_resume_refused_when_an_installed_file_was_modified(
    interrupted: Experiment, installed_env: Path
) -> None:
    tampered = installed_file(installed_env, "search.py")
    tampered.write_text(tampered.read_text() + "# edited after install\n")
    before = freeze(interrupted, installed_env)

    result = interrupted.cli("resume")

    assert result.code == 1, result.output
    assert f"the engine in {installed_env} fails verification (mismatch)" in result.stderr
    assert "- file automl_refengine/search.py: recorded sha256=" in result.stderr
    assert "automl-setup recreate --experiment-id" in result.stderr
    assert_refused_once(
        interrupted, before, installed_env, reason="fails verification",
        fields=("file automl_refengine/search.py",),
    )  # fmt: skip


@pytest.mark.slow
def test_resume_refused_in_an_environment_without_record(
    tmp_path: Path, source_repo: SourceRepository, installed_env: Path, interrupted: Experiment
) -> None:
    plain = plain_engine_env(tmp_path, source_repo)
    before = freeze(interrupted, installed_env, plain)

    result = interrupted.cli("resume", "--python", str(plain))

    assert result.code == 1, result.output
    assert f"no engine record in {plain}: nothing proves it is the bound engine" in result.stderr
    assert "automl-setup recreate --experiment-id" in result.stderr
    assert_refused_once(
        interrupted, before, installed_env, plain, reason="no engine record", fields=("record",)
    )


@pytest.mark.slow
def test_resume_refused_while_a_detached_engine_holds_the_lock(
    tmp_path: Path, installed_env: Path, reaper: Reaper
) -> None:
    exp = Experiment(
        write_manifest(tmp_path / "manifest.yaml", max_trials=2, sleep=30.0),
        tmp_path / "ws",
        installed_env,
    )
    pid = launch_detached(exp, reaper)
    trial_out = exp.engine_dir / "trial-00000" / "stdout.log"
    # The trial printed its params and sleeps: the engine writes nothing until it ends.
    wait_for(
        "the first trial to start",
        lambda: trial_out.exists() and b"params" in trial_out.read_bytes(),
    )
    before = freeze(exp, installed_env)

    result = exp.cli("resume")

    assert result.code == 1, result.output
    assert f"another controller holds the lock of experiment {EXP}" in result.stderr
    assert f"automl-setup status --experiment-id {EXP}" in result.stderr
    assert_refused_once(exp, before, installed_env, reason="another controller holds the lock")
    assert exp.status()["controller_running"] is True
    os.kill(pid, signal.SIGTERM)
    assert reaper.reap(pid) == 143
    assert exp.status()["controller_running"] is False


@pytest.mark.slow
def test_resume_of_an_unknown_experiment_id_creates_nothing(interrupted: Experiment) -> None:
    before = tree_digest(interrupted.workspace)
    dirs_before = sorted(p for p in interrupted.workspace.rglob("*"))

    result = interrupted.cli("resume", "--experiment-id", "nope")

    assert result.code == 1, result.output
    assert (
        f"no experiment 'nope' launched by automl-setup in {interrupted.workspace}" in result.stderr
    )
    assert f"automl-setup list --workspace {interrupted.workspace}" in result.stderr
    assert tree_digest(interrupted.workspace) == before
    assert sorted(p for p in interrupted.workspace.rglob("*")) == dirs_before


def test_resume_takes_an_explicit_id_only(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "manifest.yaml")
    workspace = tmp_path / "ws"
    for id_args in ([], ["--experiment-id"]):
        result = run_cli(
            "resume", *id_args, "--workspace", str(workspace), "--manifest", str(manifest),
            "--python", str(tmp_path / "no-env"),
        )  # fmt: skip
        assert result.code == 2, result.output
        assert "--experiment-id" in result.stderr and "usage:" in result.stderr
    assert not workspace.exists() and not (tmp_path / "no-env").exists()


@pytest.mark.parametrize("bad", ["../exp", ".hidden", "-rf", "a/b", "x" * 65])
def test_resume_rejects_an_invalid_experiment_id(tmp_path: Path, bad: str) -> None:
    manifest = write_manifest(tmp_path / "manifest.yaml")
    result = run_cli(
        "resume", f"--experiment-id={bad}", "--workspace", str(tmp_path / "ws"),
        "--manifest", str(manifest), "--python", str(tmp_path / "no-env"),
    )  # fmt: skip
    assert result.code == 2, result.output
    assert "is not a valid experiment id" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.yaml"]
