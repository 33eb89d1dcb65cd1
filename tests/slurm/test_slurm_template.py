"""The controller batch template's validation, run with plain `bash` and crafted variables (no
scheduler needed): action, allocation cap and restart count, the exit codes, the helper, the
identity gate's codes, signals before the engine starts, argv byte identity and exec.

The "engine" here is a real process (python or /bin/echo) and the gate a tiny script that
records its arguments: the script under test is the real rendered template.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from support.refengine import ENGINE_SRC
from support.signals import with_dispositions

from mcp_server.slurm.template import (
    EX_TEMPFAIL,
    EXIT_BOOTSTRAP,
    EXIT_IDENTITY,
    EXIT_INVALID,
    ControllerValues,
    render,
)

sys.path.insert(0, str(ENGINE_SRC))
from automl_refengine import allocation as engine_allocation
from automl_refengine.errors import InvalidInput as EngineInvalidInput

# The engine prints its pid, argv and the cap it was given, as JSON.
ENGINE = (
    "import json, os, sys; e = os.environ; print(json.dumps([os.getpid(), sys.argv, "
    "e.get('AUTOML_CONTROLLER_MAX_ALLOCATIONS'), e.get('VIRTUAL_ENV'), 'PYTHONPATH' in e]))"
)
# Arguments no shell may reinterpret: quotes, spaces, globs, newlines, $(...), a leading dash.
AWKWARD = ["it's", "a b", "*", "$(touch /tmp/pwned)", "line\nbreak", "-n", "", "\\", '"q"']


class Controller:
    def __init__(self, root: Path, engine: list[str] | None = None) -> None:
        self.root = root
        self.gate_log = root / "gate.log"
        self.helper_mark = root / "helper-ran"
        self.lock = root / "controller.lock"
        gate = root / "fake automl-setup"
        gate.write_text('#!/bin/bash\nprintf "%s\\n" "$*" >>"$GATE_LOG"\nexit "${GATE_EXIT:-0}"\n')
        gate.chmod(0o755)
        engine = engine or [sys.executable, "-c", ENGINE]
        self.run_argv = [*engine, "run", *AWKWARD]
        self.resume_argv = [*engine, "resume", *AWKWARD]
        values = ControllerValues(
            automl_setup=gate,
            experiment_id="exp-1",
            workspace=root / "work space",
            engine_env=root / "env",
            controller_lock=self.lock,
            max_allocations="3",
            run_argv=self.run_argv,
            resume_argv=self.resume_argv,
        )
        self.script = root / "controller.sbatch"
        self.script.write_text(render(values))

    def helper(self, body: str) -> str:
        path = self.root / "helper"
        path.write_text(f"#!/bin/bash\ntouch {self.helper_mark}\n{body}\n")
        path.chmod(0o755)
        return str(path)

    def run(self, **variables: str) -> subprocess.CompletedProcess[str]:
        env = {"PATH": os.environ["PATH"], "GATE_LOG": str(self.gate_log), "PYTHONPATH": "/x"}
        env.update(variables)
        # As slurmstepd starts a batch script: its traps need the signals at their default (a
        # shell cannot trap one ignored on entry), whatever this test run inherited.
        argv = with_dispositions(["bash", str(self.script)])
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)

    def gate_calls(self) -> list[str]:
        return self.gate_log.read_text().splitlines() if self.gate_log.exists() else []


@pytest.fixture
def controller(tmp_path: Path) -> Controller:
    return Controller(tmp_path)


def engine_output(proc: subprocess.CompletedProcess[str]) -> tuple[int, list[str], str | None]:
    pid, argv, cap, _venv, _pythonpath = json.loads(proc.stdout)
    return pid, argv, cap


def test_unset_variables_exec_the_bound_run_argv_byte_for_byte(controller: Controller) -> None:
    proc = controller.run()
    assert proc.returncode == 0, proc.stderr
    _pid, argv, cap = engine_output(proc)
    assert argv == ["-c", *controller.run_argv[3:]]  # python's sys.argv of `-c CODE ARGS`
    assert cap == "3"  # the rendered default, exported unchanged
    # The engine's environment is its own venv's, as launch gives it.
    assert json.loads(proc.stdout)[3:] == [str(controller.root / "env"), False]
    (call,) = controller.gate_calls()
    assert "--generation 0 --cap 3 --action run" in call


def test_the_engine_replaces_the_batch_shell(controller: Controller) -> None:
    proc = subprocess.Popen(
        ["bash", str(controller.script)],
        env={"PATH": os.environ["PATH"], "GATE_LOG": str(controller.gate_log)},
        stdout=subprocess.PIPE,
        text=True,
    )
    out, _ = proc.communicate(timeout=30)
    assert json.loads(out)[0] == proc.pid  # exec: no wrapper process


@pytest.mark.parametrize(
    ("cap", "restart", "action", "expect"),
    [
        ("3", None, "resume", "resume"),
        ("3", "0", None, "run"),
        ("003", "0002", None, "resume"),  # zero padding: cap 3, generation 2
        ("0002", "01", None, "resume"),
        ("10", "9", None, "resume"),
        ("010", "08", None, "resume"),  # never octal: 010 is ten, 08 is eight
        ("0" * 38 + "99", "0" * 39 + "98", None, "resume"),
        ("9" * 40, "9" * 39, None, "resume"),  # 40 digits: no arithmetic overflow
    ],
)
def test_generations_below_the_cap_start_the_engine(
    controller: Controller, cap: str, restart: str | None, action: str | None, expect: str
) -> None:
    variables = {"AUTOML_CONTROLLER_MAX_ALLOCATIONS": cap}
    if restart is not None:
        variables["SLURM_RESTART_COUNT"] = restart
    if action is not None:
        variables["AUTOML_ACTION"] = action
    proc = controller.run(**variables)
    assert proc.returncode == 0, proc.stderr
    _pid, argv, given = engine_output(proc)
    assert argv[1] == expect  # the action word follows `-c CODE`
    assert given == cap  # the cap string reaches the engine unchanged
    generation = (restart or "0").lstrip("0") or "0"
    (call,) = controller.gate_calls()
    assert f"--generation {generation} " in call and f" --action {expect}" in call


@pytest.mark.parametrize(
    ("cap", "restart"),
    [
        ("3", "3"),
        ("003", "0003"),
        ("2", "2"),
        ("1", "1"),
        ("2", "0010"),
        ("9" * 39, "1" + "0" * 39),
    ],
)
def test_exhausted_allocations_exit_2_before_helpers_and_say_so(
    controller: Controller, cap: str, restart: str
) -> None:
    proc = controller.run(
        AUTOML_CONTROLLER_MAX_ALLOCATIONS=cap,
        SLURM_RESTART_COUNT=restart,
        AUTOML_STARTUP_HELPER=controller.helper("exit 0"),
    )
    assert proc.returncode == EXIT_INVALID and proc.stdout == ""  # the engine never ran
    assert "allocations exhausted" in proc.stderr and "SLURM_RESTART_COUNT" in proc.stderr
    assert not controller.helper_mark.exists() and not controller.lock.exists()
    (call,) = controller.gate_calls()  # only to record the refusal in the ledger
    assert call.endswith("--exhausted")


MALFORMED = [
    *(("AUTOML_ACTION", v) for v in ["", "RUN", "start", "run ", " resume", "resume;id", "-h"]),
    *(
        ("AUTOML_CONTROLLER_MAX_ALLOCATIONS", v)
        for v in [
            "",
            "0",
            "000",
            "abc",
            "1a",
            "-1",
            "+3",
            " 3",
            "3 ",
            "0x10",
            "1e3",
            "3.0",
            "٣",
            "３",
            "3\n",
            "$(id)",
            "1 2",
        ]
    ),
    *(("SLURM_RESTART_COUNT", v) for v in ["", "x", "-1", "+1", "1.0", "١", "0 ", "1,2", "$((1))"]),
]


@pytest.mark.parametrize(("name", "value"), MALFORMED)
def test_malformed_variables_exit_2_naming_them_before_anything_runs(
    controller: Controller, name: str, value: str
) -> None:
    helper = controller.helper("exit 0")
    proc = controller.run(**{name: value, "AUTOML_STARTUP_HELPER": helper})
    assert proc.returncode == EXIT_INVALID, proc.stderr
    assert name in proc.stderr and proc.stdout == ""
    assert not controller.helper_mark.exists() and not controller.lock.exists()
    assert controller.gate_calls() == []


def test_the_script_and_the_engine_draw_the_same_boundary(tmp_path: Path) -> None:
    """Hundreds of (cap, restart count) pairs, zero padded and up to 40 digits: the template's
    decision (exit 2 or start) is the engine's (--max-allocations, exhausted or not)."""
    controller = Controller(tmp_path, engine=["true"])  # no interpreter start per case
    rng = random.Random(16)
    digits = [1, 1, 1, 2, 3, 20, 40]
    pairs = [("1", "0"), ("1", "1"), ("2", "1"), ("2", "2")]
    for _ in range(200):
        cap, restart = (str(rng.randrange(1, 10 ** rng.choice(digits))) for _ in range(2))
        pairs.append(("0" * rng.randrange(3) + cap, "0" * rng.randrange(3) + restart))
    saved = dict(os.environ)
    try:
        for cap, restart in pairs:
            proc = controller.run(
                AUTOML_CONTROLLER_MAX_ALLOCATIONS=cap, SLURM_RESTART_COUNT=restart
            )
            os.environ.pop("SLURM_JOB_ID", None)
            os.environ["SLURM_RESTART_COUNT"] = restart
            try:
                engine_allocation.current_allocation(cap)
                engine_refuses = False
            except EngineInvalidInput as exc:
                engine_refuses = "allocations exhausted" in str(exc)
            exhausted = int(restart) >= int(cap)
            assert (proc.returncode == EXIT_INVALID) == exhausted == engine_refuses, (cap, restart)
            assert proc.returncode in (0, EXIT_INVALID), proc.stderr
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_a_failing_helper_stops_the_job_without_fallback_and_never_75(
    controller: Controller,
) -> None:
    proc = controller.run(AUTOML_STARTUP_HELPER=controller.helper(f"exit {EX_TEMPFAIL}"))
    assert proc.returncode == EXIT_BOOTSTRAP != EX_TEMPFAIL
    assert "startup helper" in proc.stderr and "exit 75" in proc.stderr
    assert proc.stdout == "" and controller.gate_calls() == []  # no engine, no gate


def test_a_passing_helper_runs_first(controller: Controller) -> None:
    proc = controller.run(AUTOML_STARTUP_HELPER=controller.helper("exit 0"))
    assert proc.returncode == 0 and controller.helper_mark.exists()


def test_a_signal_before_the_engine_starts_is_a_bootstrap_failure(controller: Controller) -> None:
    proc = controller.run(AUTOML_STARTUP_HELPER=controller.helper("kill -TERM $PPID; exit 0"))
    assert proc.returncode == EXIT_BOOTSTRAP, proc.stderr
    assert "signal TERM before the engine started" in proc.stderr and proc.stdout == ""


@pytest.mark.parametrize(
    ("gate_exit", "expect"),
    [
        (EXIT_IDENTITY, EXIT_IDENTITY),  # refused: this node's environment differs
        (1, EXIT_BOOTSTRAP),  # a crash of automl-setup is not an identity verdict
        (EX_TEMPFAIL, EXIT_BOOTSTRAP),
        (127, EXIT_BOOTSTRAP),
    ],
)
def test_the_gate_decides_before_the_engine(
    controller: Controller, gate_exit: int, expect: int
) -> None:
    proc = controller.run(GATE_EXIT=str(gate_exit))
    assert proc.returncode == expect and proc.stdout == ""
