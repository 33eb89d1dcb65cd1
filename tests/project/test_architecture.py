"""The shape of the code, checked mechanically: layers import only downward, no import cycle,
no module over the size limit, no face folder over its module limit, and the registry: every
operation has exactly one CLI command and one MCP tool with the same fields as its request
model, but for the differences its row documents."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest
from mcp.client import Client
from pydantic import BaseModel

from mcp_server.faces.cli.flags import populate_all
from mcp_server.faces.cli.main import OWN_HANDLERS, build_parser
from mcp_server.faces.mcp.server import server
from mcp_server.faces.mcp.tools import REPLY_ADDS
from mcp_server.faces.registry import ROWS

PACKAGE = Path(__file__).resolve().parents[2] / "mcp_server"
MAX_LINES = 400

# Layer of each top-level piece, and the layers it may import. Foundation modules sit below
# everything; a layer may import itself and what is below it, never what is above.
FOUNDATION = {
    "errors",
    "redact",
    "fsutil",
    "persisted",
    "children",
    "_version",
    "scratch",
    "values",
    "selectors",
    "pausepoints",
    "cancellation",
    # Scripts run in a target's interpreter: stdlib only (tests/engine/test_target_side.py).
    "target_side",
    "__init__",
}
CORE = {"foundation", "source", "requests", "environment", "experiments"}
MAY_IMPORT = {
    "foundation": {"foundation"},
    "source": {"foundation", "source"},
    "requests": {"foundation", "source"},
    "environment": {"foundation", "source", "requests", "environment"},
    "experiments": CORE,
    "slurm": CORE | {"slurm"},
    "report": CORE | {"report"},
    # An experiment in a tracker: its report and lock among the artifacts.
    "tracking": CORE | {"report", "tracking"},
    "operations": CORE | {"slurm", "report"},
    "skills": {"foundation", "skills"},
    # The bundle in a user's project: the skills it carries and `init`; beside the core, like
    # skills/, reading only the profile rules (an engine table it writes must load).
    "bundle": {"foundation", "source", "skills", "bundle"},
    "faces": CORE | {"slurm", "report", "tracking", "operations", "skills", "bundle", "faces"},
    "schemagen": CORE | {"slurm", "report", "tracking", "operations", "bundle", "skills"},
    # The reference docs, written from the faces (their parsers and tools) and the models.
    "docgen": CORE
    | {"slurm", "report", "tracking", "operations", "skills", "bundle", "faces", "schemagen"},
}
# Whose face lists what: commands and tools that are not operations, and why.
CLI_ONLY_COMMANDS = {
    "demo": "the whole story on the embedded reference engine, for a person at a terminal",
    "skills": "maintains this repository's skill bundle, not an engine or an experiment",
    "mcp": "starts the MCP server itself",
    "init": "configures a project for the agents (skills, server entries); an agent does not "
    "configure itself, and the MCP server it registers is the one that would be asking",
    "completion": "a shell's completion script; an agent calls tools, it has no shell to complete",
    "config show": "the settings a command run here would use; every MCP reply that uses a "
    "profile names it and its source (profile_source), and the tools take explicit paths",
    "slurm render": "a reviewer's look at the batch script before submitting; the MCP "
    "submit_slurm_job reply names the script it rendered",
    "slurm gate": "run by the controller batch script on every allocation, never by a person "
    "or an agent",
}
# Flags of the command line that are presentation, not fields of a request.
PRESENTATION_FLAGS = {"help", "json"}
PROFILE_FLAGS = {"profile", "repository", "subdirectory", "distribution", "requirement"}


def modules() -> list[Path]:
    return sorted(
        p for p in PACKAGE.rglob("*.py") if "reference_engine" not in p.relative_to(PACKAGE).parts
    )


def dotted(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    return ".".join(rel.parts).removesuffix(".__init__")


def layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in FOUNDATION:  # a foundation package's modules too
        return "foundation"
    return parts[1]


def imports(path: Path) -> set[str]:
    """Every mcp_server module `path` imports, at any depth (lazy imports count too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mcp_"):
            found.add(node.module)
            for alias in node.names:  # `from mcp_server.faces import messages`
                candidate = f"{node.module}.{alias.name}"
                if (PACKAGE.parent / (candidate.replace(".", "/") + ".py")).exists():
                    found.add(candidate)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("mcp_server")}
    return found


# What starts a program: only mcp_server/children/ may call these (the MCP server's own fork
# into a session of its own, faces/mcp/lifecycle.py, runs no other program).
SPAWNS = {
    ("subprocess", "run"), ("subprocess", "Popen"), ("subprocess", "call"),
    ("subprocess", "check_call"), ("subprocess", "check_output"), ("os", "system"),
    ("os", "popen"), ("os", "posix_spawn"), ("os", "posix_spawnp"),
}  # fmt: skip


def test_only_the_children_package_starts_processes() -> None:
    """One home for child processes: every other module asks mcp_server/children/ to start
    one (with its step, limit and stall bound), never subprocess or os itself."""
    found = [
        f"{dotted(path)}:{call.lineno} {call.func.value.id}.{call.func.attr}"
        for path in modules()
        if "children" not in path.relative_to(PACKAGE).parts
        for call in ast.walk(ast.parse(path.read_text()))
        if isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Name)
        and (
            (call.func.value.id, call.func.attr) in SPAWNS
            or (call.func.value.id == "os" and call.func.attr.startswith(("spawn", "exec")))
        )
    ]
    assert found == [], found


def test_layers_import_only_downward() -> None:
    upward = [
        f"{dotted(path)} ({layer(dotted(path))}) imports {target} ({layer(target)})"
        for path in modules()
        for target in imports(path)
        if layer(target) not in MAY_IMPORT[layer(dotted(path))]
    ]
    assert upward == []


def test_no_import_cycle() -> None:
    graph = {dotted(p): {t for t in imports(p) if t != dotted(p)} for p in modules()}
    state: dict[str, str] = {}
    cycles: list[list[str]] = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                cycles.append([*trail[trail.index(nxt) :], nxt] if nxt in trail else [node, nxt])
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert cycles == []


def test_no_module_over_the_size_limit() -> None:
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in modules()
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


# --------------------------------------------------------------------------------------------
# Face parity


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {name: p for sub in subs for name, p in sub.choices.items()}


def cli_commands(
    parser: argparse.ArgumentParser | None = None, prefix: str = ""
) -> dict[str, argparse.ArgumentParser]:
    """Every command by its full name: nested ones as "slurm submit", "slurm watch register".
    A group that takes no flags of its own ("slurm") is not a command; one that does
    ("slurm watch --once" beside "slurm watch register") is."""
    found: dict[str, argparse.ArgumentParser] = {}
    for name, child in _subcommands(parser or populate_all(build_parser())).items():
        full = f"{prefix}{name}"
        nested = cli_commands(child, f"{full} ")
        if not nested or cli_fields(child):
            found[full] = child
        found.update(nested)
    return found


def cli_fields(parser: argparse.ArgumentParser) -> set[str]:
    dests = {
        a.dest for a in parser._actions if not isinstance(a, argparse._SubParsersAction)
    } - PRESENTATION_FLAGS
    return (dests - PROFILE_FLAGS) | ({"profile"} if dests & PROFILE_FLAGS else set())


def test_every_operation_has_one_command_with_the_request_fields() -> None:
    commands = cli_commands()
    for op in ROWS:
        assert op.command in commands, op.command
        gathered = {flag.more for flag in op.flags.values() if flag.more}  # --workspace again
        expected = set(op.request.model_fields) - op.mcp_only - gathered
        assert cli_fields(commands[op.command]) == expected, op.command
    named = {op.command for op in ROWS}
    aliases = {"experiments"}  # the old spelling of `list`, kept
    assert set(commands) - named - aliases == set(CLI_ONLY_COMMANDS)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_every_operation_has_one_tool_with_the_request_fields() -> None:
    async with Client(server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {op.tool for op in ROWS}  # no tool that is not an operation
    for op in ROWS:
        # A tool is named after its command: its words, and what it acts on (list_branches).
        assert set(op.command.split()) <= set(op.tool.split("_")), op.tool
        fields = set(tools[op.tool].input_schema["properties"])
        assert fields == set(op.request.model_fields) - op.cli_only, op.tool
        assert (op.cli_only or op.mcp_only) == frozenset() or op.why, op.command


def test_the_cli_default_branch_is_the_only_face_difference_of_install() -> None:
    """Documented in ROWS: a person at the command line gets main; an agent is asked."""
    (install,) = (op for op in ROWS if op.command == "install")
    assert "asks the user" in install.why
    args = build_parser().parse_args(["install", "--python", "/x"])
    assert args.branch is None and args.commit is None  # the default is applied by the face


def test_every_row_names_what_exists_and_says_why_its_faces_differ() -> None:
    """A row is the whole of an operation: what it names loads, its tool is described, and
    every departure of a face from the request is a field of that request, with a reason."""
    for op in ROWS:
        fields = set(op.request.model_fields)
        operation = op.operation()  # its area imported: what the row names exists
        assert issubclass(op.request, BaseModel), op.command
        assert issubclass(operation.result, BaseModel), op.command
        assert callable(operation.function) and callable(operation.render), op.command
        assert op.mcp.description and op.summary and op.example.startswith("automl-setup ")
        assert set(op.mcp.fixed) <= op.cli_only, op.command  # what the tool sets, it omits
        assert set(op.flags) <= fields, op.command
        assert {n for names in op.exclusive for n in names} <= fields, op.command
    # A face's own handling of an operation is of an operation, and a handler of the command
    # line's own is there for what only it does (the row's `why`).
    commands = {op.command: op for op in ROWS}
    assert set(REPLY_ADDS) <= set(commands)
    assert set(OWN_HANDLERS) <= set(commands)
    assert all(commands[command].why for command in OWN_HANDLERS)


# No folder of the faces holds more modules than a reader can keep in view.
MAX_FACE_MODULES = 15


def test_no_face_folder_is_over_the_size_limit() -> None:
    faces = PACKAGE / "faces"
    for folder in (faces, *(p for p in faces.rglob("*") if p.is_dir() and p.name[0] != "_")):
        found = [p for p in folder.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
        assert len(found) <= MAX_FACE_MODULES, (folder, len(found))
