"""Part 4 of bench/experiments.py: `list` and `status` of a workspace with many experiments.

One experiment is launched for real (foreground, to completion) and cloned N-1 times in the
real formats: the engine's files by the installed engine's own modules (its recorded manifest
and digest, the ledger's session event naming the clone, the state replayed from that ledger),
automl-setup's by its own models (a binding whose digest recomputes, the attempts ledger, the
controller lock, the attempt's log, the user's manifest). Every clone is a real experiment to
both programs; none is started, which is what makes a thousand of them cheap to make.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from mcp_server.experiments.binding import read_binding
from mcp_server.experiments.files import ExperimentFiles

LIST_TARGET_S = 2.0  # list of 1,000 experiments
STATUS_TARGET_S = 0.3

# Runs inside the engine's environment: clones the engine's experiment `template` of
# `workspace` under every id read from stdin (one per line).
CLONE = r"""
import json, shutil, sys
from pathlib import Path
from automl_refengine.durable import atomic_write_json
from automl_refengine.layout import ExperimentPaths, read_recorded_manifest, write_recorded_manifest
from automl_refengine.ledger import read_events
from automl_refengine.manifest import manifest_sha256
from automl_refengine.state import replay

workspace, template = Path(sys.argv[1]), sys.argv[2]
src = ExperimentPaths(workspace, template)
manifest = read_recorded_manifest(src)
events = [json.loads(line) for line in src.ledger.read_bytes().splitlines()]
for new in sys.stdin.read().split():
    dst = ExperimentPaths(workspace, new)
    shutil.copytree(src.root, dst.root)
    search = manifest.search.model_copy(update={"experiment_id": new})
    clone = manifest.model_copy(update={"search": search})
    write_recorded_manifest(dst, clone)
    lines = []
    for event in events:
        if event["event"] == "session_started":
            event = {**event, "experiment_id": new, "manifest_sha256": manifest_sha256(clone)}
        if event["event"] == "trial_started":
            argv = [a.replace(str(src.root), str(dst.root)) for a in event["argv"]]
            event = {**event, "argv": argv}
        lines.append(json.dumps(event, sort_keys=True, separators=(",", ":")))
    dst.ledger.write_bytes(("\n".join(lines) + "\n").encode())
    state = replay(read_events(dst.ledger), new, clone.search.objective)
    atomic_write_json(dst.state, state.model_dump(mode="json"))
"""


def clone_experiments(env: Path, files: ExperimentFiles, count: int) -> list[str]:
    """`count` experiments in `files.workspace` (the template among them), as described above."""
    ids = [files.experiment_id] + [f"{files.experiment_id}-{n:04d}" for n in range(1, count)]
    proc = subprocess.run(
        [str(env / "bin" / "python"), "-c", CLONE, str(files.workspace), files.experiment_id],
        input="\n".join(ids[1:]),
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"cloning the engine's experiment failed: {proc.stderr[-800:]}")
    binding = read_binding(files)
    user_manifest = yaml.safe_load(Path(binding.manifest_path).read_text(encoding="utf-8"))
    for new in ids[1:]:
        manifest = Path(binding.manifest_path).with_name(f"{new}.yaml")
        user_manifest["search"]["experiment_id"] = new
        manifest.write_text(yaml.safe_dump(user_manifest, sort_keys=False), encoding="utf-8")
        clone = binding.model_copy(
            update={
                "experiment_id": new,
                "manifest_path": str(manifest),
                "manifest_sha256": hashlib.sha256(manifest.read_bytes()).hexdigest(),
            }
        )
        target = ExperimentFiles(files.workspace, new)  # type: ignore[arg-type]
        shutil.copytree(files.dir, target.dir)
        target.binding.write_bytes(clone.model_dump_json(indent=2).encode() + b"\n")
    return ids


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[1:3]} exited {proc.returncode}: {proc.stderr[-500:]}")
    return elapsed, json.loads(proc.stdout)


# Runs in a process of its own (as a script, this folder's mcp.py would shadow the SDK):
# list_experiments through the SDK client in process, page by page; prints the first page's
# time, the whole walk's, the pages and the entries (a face without pages answers in one).
MCP_WALK = r"""
import anyio, json, sys, time
from mcp import Client
from mcp_server.faces.mcp.server import server

async def walk():
    workspace = sys.argv[1]
    async with Client(server) as client:
        await client.call_tool("list_experiments", {"workspace": workspace})  # registers
        started = time.perf_counter()
        first, cursor, pages, entries = None, None, 0, 0
        while True:
            args = {"workspace": workspace, **({"cursor": cursor} if cursor else {})}
            data = (await client.call_tool("list_experiments", args)).structured_content
            first = first or time.perf_counter() - started
            pages += 1
            entries += len(data["experiments"]) + len(data["unreadable"])
            cursor = data.get("next_cursor")
            if not cursor:
                print(json.dumps([first, time.perf_counter() - started, pages, entries]))
                return

anyio.run(walk)
"""


def _mcp_walk(workspace: Path, env: dict[str, str]) -> tuple[float, float, int, int]:
    proc = subprocess.run(
        [sys.executable, "-c", MCP_WALK, str(workspace)],
        capture_output=True, text=True, env=env, cwd=workspace, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"the MCP walk failed: {proc.stderr[-800:]}")
    first, walk, pages, entries = json.loads(proc.stdout)
    return first, walk, pages, entries


def measure_scale(
    cli: list[str], env_vars: dict[str, str], workspace: Path, runs: int, *, new: bool
) -> dict[str, Any]:
    """Medians of `runs`: list (after the first, cold call: every snapshot is current then)
    and one status through the command line; MCP's walk. A tree without snapshots (`new`
    false) lists once: every call of it is cold."""
    list_argv = [*cli, "list", "--workspace", str(workspace), "--json"]
    cold_list, listed = _timed(list_argv, env_vars)
    ids = [e["experiment_id"] for e in listed["experiments"]]
    status_argv = [*cli, "status", "--experiment-id", ids[len(ids) // 2]]
    status_argv += ["--workspace", str(workspace), "--json"]
    warm = [_timed(list_argv, env_vars)[0] for _ in range(runs if new else 0)]
    warm_list = statistics.median(warm) if warm else cold_list
    status = statistics.median(_timed(status_argv, env_vars)[0] for _ in range(runs))
    figures: dict[str, Any] = {
        "entries": len(ids) + len(listed["unreadable"]),
        "list cold": cold_list,
        "list": warm_list,
        "status": status,
        "listing": listed,
    }
    if new:
        first, walk, pages, entries = _mcp_walk(workspace, env_vars)
        figures.update({"mcp first page": first, "mcp walk": walk, "mcp pages": pages})
        figures["mcp entries"] = entries
    return figures


def same_answers(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """The two listings say the same of every experiment (new fields of the new one aside)."""
    keys = set(old["experiments"][0]) if old["experiments"] else set()

    def view(listing: dict[str, Any]) -> list[dict[str, Any]]:
        return [{k: e.get(k) for k in keys} for e in listing["experiments"]]

    return view(old) == view(new) and old["unreadable"] == new["unreadable"]


def report(sizes: list[int], figures: dict[str, dict[int, dict[str, Any]]]) -> None:
    """One table: each tree's figures per workspace size, in ms."""
    print(
        f"   median of the runs, ms; cold = the first call (no snapshot); target list of 1,000 "
        f"<= {LIST_TARGET_S * 1000:.0f} ms, status <= {STATUS_TARGET_S * 1000:.0f} ms"
    )
    names = ("list cold", "list", "status", "mcp first page", "mcp walk")
    print("   " + f"{'tree / figure':<28}" + "".join(f"{n:>12,}" for n in sizes))
    for tree, by_size in figures.items():
        for name in names:
            if name not in by_size[sizes[0]]:
                continue
            cells = "".join(f"{by_size[n][name] * 1000:>12,.0f}" for n in sizes)
            print(f"   {tree + ' ' + name:<28}{cells}")
    if "after" in figures:
        after = figures["after"]
        pages = ", ".join(f"{n:,}: {after[n]['mcp pages']} pages" for n in sizes)
        print(f"   MCP list_experiments pages walked: {pages}")
        biggest = after[max(sizes)]
        verdict = biggest["list"] <= LIST_TARGET_S and biggest["status"] <= STATUS_TARGET_S
        print(f"   targets at {max(sizes):,}: {'MET' if verdict else 'MISSED'}")
    if {"before", "after"} <= set(figures):
        same = all(same_answers(figures["before"][n]["listing"], figures["after"][n]["listing"])
                   for n in sizes)  # fmt: skip
        print(f"   before and after list the same answers: {'yes' if same else 'NO'}")
    sys.stdout.flush()
