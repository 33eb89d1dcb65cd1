"""A stand-in SLURM on PATH: `sbatch`, `squeue`, `sacct` and `scancel` as one small Python
script over a JSON state file, so the product's scheduler code runs in every test run, not
only where a real cluster exists (tests/slurm/README.md; those tests stay as they are).

The shim answers only the argv forms the product sends (scheduler.py, submit.py, control.py)
and refuses any other option, so a test pins the exact command lines; every argv it receives
is logged, with the SLURM_CONF it saw. Its output formats are the real commands' ones:
`sbatch --parsable` prints the id, `squeue --Format=F:|,...` ends every field with `|`, an
squeue asked only for forgotten jobs fails with "Invalid job id specified", `sacct
--parsable2` separates fields with `|`, and without accounting storage sacct fails with
"Slurm accounting storage is disabled" (the test cluster's configuration).
"""

from __future__ import annotations

import json
import os
import pwd
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.cli import CliResult, run_cli
from support.refengine import manifest_data, write_manifest

COMMANDS = ("sbatch", "squeue", "sacct", "scancel")
FIRST_JOB_ID = 4242
# squeue's default (no --states): the jobs still active.
ACTIVE = {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "REQUEUED", "SUSPENDED"}

SHIM = r'''
import json, os, re, sys
from datetime import datetime
from pathlib import Path

STATE, CALLS = Path(__STATE__), Path(__CALLS__)
ACTIVE = __ACTIVE__
SQUEUE_FIELDS = {"JobID": "id", "State": "state", "Reason": "reason", "RestartCnt": "restarts",
                 "UserID": "uid", "UserName": "user", "SubmitTime": "submit"}
SACCT_FIELDS = {"JobIDRaw": "id", "State": "state", "UID": "uid", "User": "user",
                "Submit": "submit"}


def refuse(name, text):
    sys.stderr.write(f"{name}: error: {text}\n")
    return 1


def options(args, flags, valued):
    """The long options of argv (--flag, --name=value) and its positionals, or None."""
    found, rest = {}, []
    for arg in args:
        key, eq, value = arg.partition("=")
        if not arg.startswith("-"):
            rest.append(arg)
        elif (key in flags and not eq) or (key in valued and eq):
            found[key] = value
        else:
            return None, arg
    return found, rest


def row(job, fields, names):
    values = []
    for name in fields:
        if name not in names:
            return None
        values.append(str(job[names[name]]))
    return values


def stdout_path(pattern, job_id, name, user):
    """Where the job's output goes: sbatch's filename pattern (man sbatch, "filename
    pattern"): a backslash anywhere turns the replacements off and is dropped (slurmd 22.05
    opened ".../backslash/slurm-%j.out" for a directory named "back\\slash")."""
    if "\\" in pattern:
        return pattern.replace("\\", "")
    values = {"%": "%", "j": job_id, "A": job_id, "x": name, "u": user}

    def replace(match):
        pad, key = match.groups()
        value = values[key]
        return value.zfill(int(pad)) if pad and value.isdigit() else value

    return re.sub(r"%([0-9]*)([%jAxu])", replace, pattern)


def sbatch(state, args):
    # sbatch's own rule: options come before the script; what follows it is the script's.
    opts = []
    while args and args[0].startswith("-"):
        opts.append(args.pop(0))
    if not args or not opts or opts[0] != "--parsable":
        return refuse("sbatch", f"shim: expected --parsable, options, script: {opts + args}")
    if any(not o.startswith("--") for o in opts):
        return refuse("sbatch", "shim: the product only sends long options")
    job_id = str(state["next_id"])
    state["next_id"] += 1
    named = dict(o[2:].partition("=")[::2] for o in opts)
    state["jobs"][job_id] = {
        "id": job_id, "state": "PENDING", "reason": "Priority", "restarts": 0,
        "uid": os.getuid(), "user": state["user"], "listed": True,
        "submit": datetime.now().strftime("%Y-%m-%dT%H:%M:%S"),
        "name": named.get("job-name", ""), "script": args[0], "script_args": args[1:],
    }
    name, user = named.get("job-name", "sbatch"), state["user"]
    if "output" in named:
        state["jobs"][job_id]["stdout"] = stdout_path(named["output"], job_id, name, user)
    print(job_id + state.get("cluster_suffix", ""))
    return 0


def squeue(state, args):
    found, rest = options(args, {"--noheader"}, {"--states", "--jobs", "--Format"})
    if found is None or rest or "--Format" not in found or "--jobs" not in found:
        return refuse("squeue", f"shim: unexpected argv {args}")
    specs = [s.split(":", 1) for s in found["--Format"].split(",")]
    fields = [s[0] for s in specs]
    asked = found["--jobs"].split(",")
    every = found.get("--states") == "all"
    jobs = [state["jobs"][j] for j in asked if j in state["jobs"] and state["jobs"][j]["listed"]]
    jobs = [j for j in jobs if every or j["state"] in ACTIVE]
    if not jobs and len(asked) == 1:  # asked for several, squeue lists the known ones
        sys.stderr.write("slurm_load_jobs error: Invalid job id specified\n")
        return 1
    for job in jobs:
        values = row(job, fields, SQUEUE_FIELDS)
        if values is None:
            return refuse("squeue", f"shim: a field it does not know: {fields}")
        print("".join(v + (s[1] if len(s) > 1 else " ") for v, s in zip(values, specs)))
    return 0


def sacct(state, args):
    flags = {"--noheader", "--parsable2", "--allocations"}
    found, rest = options(args, flags, {"--jobs", "--format"})
    if found is None or rest or "--format" not in found or "--jobs" not in found:
        return refuse("sacct", f"shim: unexpected argv {args}")
    if state["accounting"] == "disabled":
        sys.stderr.write("Slurm accounting storage is disabled\n")
        return 1
    fields = found["--format"].split(",")
    for job_id in found["--jobs"].split(","):
        job = state["jobs"].get(job_id)
        if job is not None:
            values = row({**job, "state": job.get("sacct_state", job["state"])}, fields,
                         SACCT_FIELDS)
            if values is None:
                return refuse("sacct", f"shim: a field it does not know: {fields}")
            print("|".join(values))
    return 0


def scancel(state, args):
    if not args or any(a.startswith("-") for a in args):
        return refuse("scancel", f"shim: unexpected argv {args}")
    for job_id in args:
        # Unknown or already ended: slurm 22.05's scancel says nothing and exits 0.
        job = state["jobs"].get(job_id)
        if job is not None and job["listed"] and job["state"] in ACTIVE:
            job.update(state="CANCELLED", reason="None")
    return 0


def main():
    name = Path(sys.argv[0]).name
    with CALLS.open("a") as log:
        call = {"argv": [name, *sys.argv[1:]], "slurm_conf": os.environ.get("SLURM_CONF")}
        log.write(json.dumps(call) + "\n")
    state = json.loads(STATE.read_text())
    if name in state["fail"]:
        sys.stderr.write(state["fail"][name] + "\n")
        return 1
    before = json.dumps(state)
    code = globals()[name](state, sys.argv[1:])
    if json.dumps(state) != before:
        STATE.write_text(json.dumps(state, indent=2))
    return code


sys.exit(main())
'''


class SlurmShim:
    """The shim's directory (put first on PATH by `env()`), its state and its argv log."""

    def __init__(self, root: Path, state: str | None = None) -> None:
        """A scheduler without jobs, or with the jobs of `state` (another shim's `state()`)."""
        self.root = root
        self.bin = root / "slurm-shim"
        self.bin.mkdir(parents=True)
        self.state_path = root / "slurm-shim-state.json"
        self.calls_path = root / "slurm-shim-calls.jsonl"
        user = pwd.getpwuid(os.getuid()).pw_name
        empty = {"next_id": FIRST_JOB_ID, "jobs": {}, "user": user, "accounting": "disabled",
                 "fail": {}}  # fmt: skip
        self.state_path.write_text(state if state is not None else json.dumps(empty))
        text = SHIM.replace("__STATE__", repr(str(self.state_path)))
        text = text.replace("__CALLS__", repr(str(self.calls_path)))
        text = text.replace("__ACTIVE__", repr(sorted(ACTIVE)))
        for name in COMMANDS:
            script = self.bin / name
            # -S: the shim needs the standard library only, and starts faster without site.
            script.write_text(f"#!{sys.executable} -S\n{text}")
            script.chmod(script.stat().st_mode | stat.S_IEXEC)

    def env(self, *, missing: tuple[str, ...] = ()) -> dict[str, str]:
        """PATH with the shim first. A command in `missing` is found nowhere on it: the shim
        directory is then one without it, and a directory holding a real one (CI's
        /usr/bin) is left out."""
        where = self.bin
        if missing:
            where = self.root / f"slurm-shim-without-{'-'.join(missing)}"
            where.mkdir(exist_ok=True)
            for name in set(COMMANDS) - set(missing):
                if not (where / name).exists():
                    (where / name).symlink_to(self.bin / name)  # the shim reads argv[0]
        rest = [
            d
            for d in os.environ["PATH"].split(os.pathsep)
            if not any((Path(d) / name).exists() for name in missing)
        ]
        return {"PATH": os.pathsep.join([str(where), *rest])}

    def state(self) -> str:
        return self.state_path.read_text()

    def _read(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.state())
        return data

    def _change(self, change: Callable[[dict[str, Any]], object]) -> None:
        data = self._read()
        change(data)
        self.state_path.write_text(json.dumps(data, indent=2))

    def job(self, job_id: str) -> dict[str, Any]:
        found: dict[str, Any] = self._read()["jobs"][job_id]
        return found

    def set_job(self, job_id: str, **fields: Any) -> None:
        """Change a job as the scheduler would: state, reason, restarts, uid, user, submit,
        sacct_state (sacct's word, e.g. "CANCELLED by 0"); listed=False once the controller
        has forgotten it (MinJobAge)."""
        self._change(lambda data: data["jobs"][job_id].update(fields))

    def remove_job(self, job_id: str) -> None:
        """Neither squeue nor sacct knows the job any more."""
        self._change(lambda data: data["jobs"].pop(job_id))

    def add_job(self, **fields: Any) -> str:
        """A job submitted outside the product (for `slurm watch register`)."""
        data = self._read()
        job_id = str(data["next_id"])
        data["next_id"] += 1
        data["jobs"][job_id] = {
            "id": job_id, "state": "PENDING", "reason": "Priority", "restarts": 0,
            "uid": os.getuid(), "user": data["user"], "listed": True,
            "submit": "2026-12-01T10:00:00", **fields,
        }  # fmt: skip
        self.state_path.write_text(json.dumps(data, indent=2))
        return job_id

    def fail(self, command: str, message: str | None) -> None:
        """From now on `command` prints `message` on stderr and exits 1 (None: it works)."""

        def change(data: dict[str, Any]) -> None:
            data["fail"].pop(command, None)
            if message is not None:
                data["fail"][command] = message

        self._change(change)

    def accounting(self, enabled: bool) -> None:
        self._change(lambda data: data.update(accounting="enabled" if enabled else "disabled"))

    def cluster(self, name: str) -> None:
        """sbatch --parsable prints `<id>;<cluster>`, as on a multi-cluster setup."""
        self._change(lambda data: data.update(cluster_suffix=f";{name}"))

    def _log(self) -> list[dict[str, Any]]:
        if not self.calls_path.exists():
            return []
        return [json.loads(line) for line in self.calls_path.read_text().splitlines()]

    def calls(self, command: str | None = None) -> list[list[str]]:
        """Every argv received, in order (of one command, given its name)."""
        return [c["argv"] for c in self._log() if command in (None, c["argv"][0])]

    def slurm_confs(self) -> set[str | None]:
        """The SLURM_CONF values the shim was run with."""
        return {c["slurm_conf"] for c in self._log()}


def squeue_argv(*job_ids: str) -> list[str]:
    """The one squeue command line the product sends (scheduler.py): allow-listed fields."""
    fields = "JobID:|,State:|,Reason:|,RestartCnt:|,UserID:|,UserName:|,SubmitTime:|"
    return ["squeue", "--noheader", "--states=all", f"--jobs={','.join(job_ids)}",
            f"--Format={fields}"]  # fmt: skip


def sacct_argv(*job_ids: str) -> list[str]:
    return ["sacct", "--noheader", "--parsable2", "--allocations", f"--jobs={','.join(job_ids)}",
            "--format=JobIDRaw,State,UID,User,Submit"]  # fmt: skip


def submit(
    shim: SlurmShim, env: Path, where: Path, *extra: str, cwd: Path | None = None
) -> CliResult:
    """`slurm submit` of a two-trial experiment `exp` (manifest written into `where`)."""
    manifest = write_manifest(where / "m.yaml", manifest_data(max_trials=2))
    args = ["--manifest", str(manifest), "--python", str(env), *extra]
    return run_cli("slurm", "submit", *args, env=shim.env(), cwd=cwd)


def submitted_workspace(root: Path, env: Path) -> tuple[Path, str]:
    """A workspace in `root` whose experiment `exp` was submitted as job 4242 (pending), and
    the shim's state after it: tests work in copies, so the submit is paid once a module."""
    shim = SlurmShim(root)
    with pytest.MonkeyPatch.context() as patch:  # as the tests' own fixture does
        patch.delenv("SLURM_CONF", raising=False)
        result = submit(shim, env, root, "--workspace", str(root / "ws"))
    assert result.code == 0, result.output
    return root / "ws", shim.state()
