"""How far an install's request travels through automl-setup's modules (issue 44): run from the
tree to measure, it installs the reference engine from a fresh local repository into a new venv
with the command line in this process, under a profiler on every thread, and prints

- modules: the product modules (`mcp_server.*`) the operation's calls enter;
- returns: the call edges (caller function -> callee function, each counted once however often
  a loop takes it) that enter a module the request had already been in;
- each module with the times control came back to it.

Every module the install imports is imported before the profiler starts, so an import's
module-level code is not a visit. Counting starts at the call of the install operation
(`environment/install.py: install_engine`, after the command line parsed the request).

  cd TREE && python /path/to/bench/installpath.py [--workdir DIR] [--json OUT]

(TREE: this checkout, or an older one unpacked with `git archive OLD | tar -x -C TREE`.)
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import shutil
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

START = ("mcp_server.environment.install", "install_engine")
# What reads the wheel: its metadata (the zip's METADATA and RECORD) and its sha256.
READERS = {
    ("mcp_server.source.wheelbuild", "read_wheel_metadata"): "the wheel's metadata read",
    ("mcp_server.source.wheelbuild", "sha256_file"): "a wheel file hashed",
    ("mcp_server.environment.wheelstore", "_hash"): "a stored wheel hashed",
}
SKIPPED_PACKAGES = ("mcp_server.reference_engine", "mcp_server.bundled_skills")


class ModulePath:
    """The module transitions of the traced calls, per thread."""

    def __init__(self) -> None:
        self.on = False
        self.stacks: dict[int, list[str]] = {}
        self.visited: list[str] = []
        self.edges: set[tuple[str, str]] = set()
        self.returns: Counter[str] = Counter()
        self.reads: Counter[str] = Counter()

    def profile(self, frame: FrameType, event: str, _arg: Any) -> None:
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("mcp_server.") or event not in ("call", "return"):
            return
        code = frame.f_code
        if not self.on:
            if event == "call" and (module, code.co_name) == START:
                self.on = True
            else:
                return
        stack = self.stacks.setdefault(threading.get_ident(), [])
        if event == "return":
            if stack:
                stack.pop()
            return
        if (module, code.co_name) in READERS:
            self.reads[READERS[module, code.co_name]] += 1
        caller = stack[-1] if stack else ""
        stack.append(module)
        if caller == module:
            return
        callee = f"{module}:{code.co_name}"
        edge = (self._function(frame.f_back), callee)
        if edge in self.edges:
            return
        self.edges.add(edge)
        if module in self.visited:
            self.returns[module] += 1
        else:
            self.visited.append(module)

    @staticmethod
    def _function(frame: FrameType | None) -> str:
        while frame is not None:
            module = frame.f_globals.get("__name__", "")
            if module.startswith("mcp_server."):
                return f"{module}:{frame.f_code.co_name}"
            frame = frame.f_back
        return ""


def import_everything() -> None:
    import mcp_server

    for info in pkgutil.walk_packages(mcp_server.__path__, "mcp_server."):
        if info.name.startswith(SKIPPED_PACKAGES) or info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except ImportError:  # an extra's module (report, tracking) the install never runs
            continue


def trace_install(workdir: Path) -> ModulePath:
    from mcp_server.faces.cli.main import main
    from mcp_server.source.sourcerepo import SourceRepository

    repo = SourceRepository(workdir / "repo")
    repo.commit_engine("main", marker="installpath")
    os.environ["AUTOML_SETUP_STORE"] = str(workdir / "store")
    argv = [
        "install", "--branch", "main", "--python", str(workdir / "env"), "--create-env",
        "--repository", repo.url, "--subdirectory", "packages/automl-core",
        "--distribution", "automl-refengine",
    ]  # fmt: skip
    import_everything()
    counter = ModulePath()
    threading.setprofile(counter.profile)
    sys.setprofile(counter.profile)
    try:
        code = main(argv)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    if code != 0:
        raise SystemExit(f"the install exited {code}")
    return counter


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, help="kept afterwards (default: a temporary one)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="automl-setup-path-"))).absolute()
    try:
        counter = trace_install(workdir)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    total = sum(counter.returns.values())
    print(f"{sys.version.split()[0]}; the tree {os.getcwd()}; aim (issue 44): under 12 modules")
    print("and under 20 returns, the wheel's metadata read once and the store's copy hashed once")
    print(f"modules: {len(counter.visited)}; returns to one already visited: {total}")
    for what in READERS.values():
        print(f"{what}: {counter.reads[what]} times")
    for module in counter.visited:
        print(f"  {module.removeprefix('mcp_server.'):36} {counter.returns[module]:3} returns")
    if args.json:
        figures = {
            "modules": counter.visited,
            "returns": dict(counter.returns),
            "total": total,
            "reads": dict(counter.reads),
        }
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    # The tree in the working directory is the one measured, never bench/ (whose mcp.py would
    # shadow the MCP SDK's package).
    sys.path[0] = os.getcwd()
    sys.exit(main())
