"""Benchmark of the MCP server (prints figures; not a test).

    .venv/bin/python bench/mcp.py [--runs N]

1. Cold start: spawn `automl-setup-mcp`, `initialize`, `tools/list`; time to the tools/list
   answer, against a hello-world `MCPServer` with one tool started the same way in the same
   run, alternating (target: within 1.2x of it).
2. `verify_engine` round trip on a verified environment through a running server, against
   `automl-setup verify` run as a process (target: within 1.5x), with where the time goes.

Run as a script, this file's directory comes first on sys.path and `mcp` would name this
file, not the SDK: so it speaks raw JSON-RPC to the server and never imports the SDK itself.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp_server.faces.registry import ROWS  # one tool per operation

BIN = Path(sys.executable).parent
SERVER = [str(BIN / "automl-setup-mcp")]
# The baseline: the SDK's own start-up with one tool, the least any MCP server in Python pays.
HELLO_WORLD = [
    sys.executable,
    "-c",
    "from mcp.server.mcpserver import MCPServer\n"
    "server = MCPServer('hello')\n"
    "@server.tool()\n"
    "def hello(name: str) -> str:\n"
    "    'Say hello.'\n"
    "    return 'hello ' + name\n"
    "server.run()\n",
]


class Peer:
    """The server as a subprocess, spoken to in newline-delimited JSON-RPC (legacy handshake)."""

    def __init__(self, argv: list[str] = SERVER) -> None:
        env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.next_id = 0

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}})
        assert self.proc.stdout is not None
        while True:
            ready, _, _ = select.select([self.proc.stdout], [], [], 60)
            assert ready, f"no answer to {method}"
            message = json.loads(self.proc.stdout.readline())
            if message.get("id") == self.next_id:
                return message

    def initialize(self) -> None:
        self.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "0"},
            },
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def cold_start(argv: list[str] = SERVER, tools: int = len(ROWS)) -> float:
    started = time.perf_counter()
    peer = Peer(argv)
    peer.initialize()
    answer = peer.request("tools/list")
    elapsed = time.perf_counter() - started
    peer.close()
    assert len(answer["result"]["tools"]) == tools, answer
    return elapsed


def import_time(modules: str) -> float:
    """Seconds a fresh interpreter spends importing `modules` (start-up and exit excluded)."""
    code = f"import time; t = time.perf_counter(); import {modules}; print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout)


def timed(fn: Callable[[], object], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def summary(label: str, times: list[float]) -> float:
    median = statistics.median(times)
    low, high = min(times) * 1000, max(times) * 1000
    print(f"  {label:<44} median {median * 1000:7.1f} ms  (min {low:.1f}, max {high:.1f})")
    return median


def verified_environment(root: Path) -> tuple[Path, dict[str, str]]:
    from mcp_server.source.sourcerepo import REFERENCE_DISTRIBUTION, SourceRepository

    repo = SourceRepository(root / "repo")
    repo.commit_engine("main", marker="bench")
    env = root / "env"
    engine = {
        "repository": repo.url,
        "subdirectory": repo.subdirectory,
        "distribution": REFERENCE_DISTRIBUTION,
    }
    flags = [arg for key, value in engine.items() for arg in (f"--{key}", value)]
    install = [str(BIN / "automl-setup"), "install", "--branch", "main", "--create-env"]
    subprocess.run([*install, "--python", str(env), *flags], check=True, capture_output=True)
    return env, engine


def breakdown(env: Path, distribution: str, runs: int) -> None:
    """The core's own cost of a verify, in this process: where the time goes."""
    from mcp_server.environment import startcheck
    from mcp_server.environment.target import locate
    from mcp_server.environment.verify import verify_environment

    located = locate(str(env))
    python = located.interpreter

    def started_again() -> None:
        startcheck._proven.clear()  # as before issue 45: the interpreter started every time
        startcheck.start_failure(python, distribution)

    summary("start check, run each time (issue 37)", timed(started_again, runs))
    summary(
        "start check, its proof remembered (issue 45)",
        timed(lambda: startcheck.start_failure(python, distribution), runs),
    )
    summary("locate (runs the target interpreter once)", timed(lambda: locate(str(env)), runs))
    summary(
        "probe (runs the target interpreter once)",
        timed(lambda: located.probe([distribution]), runs),
    )
    summary(
        "verify_environment (probe + hashes + digest)",
        timed(lambda: verify_environment(located, distribution), runs),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs

    print(f"cold start: spawn -> initialize -> tools/list answered ({runs} runs)")
    # Interleaved, so a busy machine weighs on the figure and its breakdown alike.
    parts = {
        "import the MCP SDK (mcp.server.mcpserver)": "mcp.server.mcpserver",
        "import the core (install, experiments, ...)": "mcp_server.faces.cli, "
        "mcp_server.environment.diagnose, mcp_server.experiments.launch, "
        "mcp_server.experiments.resume, mcp_server.experiments.status, "
        "mcp_server.environment.install",
        "import the server (SDK + runtime; tools listed from the catalog)": (
            "mcp_server.faces.mcp.server"
        ),
        # What the first call pays once (faces/mcp_app.py: DeferredServer).
        "register the 21 tools (import, then register_now)": "mcp_server.faces.mcp.server; "
        "mcp_server.faces.mcp.server.server.register_now()",
    }
    cold_times: list[float] = []
    hello_times: list[float] = []
    part_times: dict[str, list[float]] = {label: [] for label in parts}
    cold_start(), cold_start(HELLO_WORLD, 1)  # warm the page cache; not counted
    for index in range(runs):
        first, second = (SERVER, HELLO_WORLD) if index % 2 == 0 else (HELLO_WORLD, SERVER)
        for argv in (first, second):
            times = cold_times if argv is SERVER else hello_times
            times.append(cold_start(argv, len(ROWS) if argv is SERVER else 1))
        for label, modules in parts.items():
            part_times[label].append(import_time(modules))
    cold = summary("automl-setup-mcp", cold_times)
    hello = summary("hello-world MCPServer with one tool (baseline)", hello_times)
    verdict = "met" if cold / hello <= 1.2 else "MISSED"
    print(f"  ratio {cold / hello:.2f}x of the baseline; target <= 1.2x: {verdict}")
    print("where a cold start spends its time (each in a fresh interpreter)")
    for label, times in part_times.items():
        summary(label, times)

    with tempfile.TemporaryDirectory(prefix="automl-setup-bench-") as tmp:
        env, engine = verified_environment(Path(tmp))
        flags = [arg for key, value in engine.items() for arg in (f"--{key}", value)]
        verify_argv = [str(BIN / "automl-setup"), "verify", "--python", str(env), *flags]

        print(f"\nverify_engine on a verified environment ({runs} runs)")
        process = summary(
            "automl-setup verify (a whole process)",
            timed(lambda: subprocess.run(verify_argv, check=True, capture_output=True), runs),
        )
        peer = Peer()
        peer.initialize()
        call = {"name": "verify_engine", "arguments": {"python": str(env), "profile": engine}}
        started = time.perf_counter()
        first = peer.request("tools/call", call)
        first_call = time.perf_counter() - started
        assert first["result"]["structuredContent"]["verified"] is True, first
        print(f"  first call (registers every tool first)      {first_call * 1000:7.1f} ms")
        tool = summary(
            "verify_engine round trip (running server)",
            timed(lambda: peer.request("tools/call", call), runs),
        )
        # Issue 45: beside the calls that start no interpreter (status and list: 4 ms).
        listing = {"name": "list_experiments", "arguments": {"workspace": str(Path(tmp) / "ws")}}
        (Path(tmp) / "ws").mkdir()
        summary(
            "list_experiments round trip (running server)",
            timed(lambda: peer.request("tools/call", listing), runs),
        )
        peer.close()
        ratio = tool / process
        verdict = "met" if ratio <= 1.5 else "MISSED"
        print(f"  ratio {ratio:.2f}x of the process; target <= 1.5x: {verdict}")
        print("\nwhere a verify spends its time (core, in process)")
        breakdown(env, engine["distribution"], runs)


if __name__ == "__main__":
    main()
