"""What `automl-setup init` writes into a project, and how to read what is there now.

For each client: every bundled skill file in its discovery folder (Claude Code
`.claude/skills/<name>/`, Codex and other agents `.agents/skills/<name>/`; real files, since
Claude Code does not follow linked skill folders), and the server in its config file. With an
engine given, the engine table of the project file (source/config.py reads it)."""

from __future__ import annotations

import itertools
import os
import shutil
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mcp_server import __version__
from mcp_server.bundle.contents import Bundle
from mcp_server.bundle.jsonedit import JsonEditError, get_member, set_member
from mcp_server.bundle.members import carried_forward
from mcp_server.bundle.ownership import (
    Agent,
    InitRecord,
    InitRecordV1,
    entry_digest,
    file_digest,
    read_record,
)
from mcp_server.bundle.tomledit import TomlEditError, get_table, set_table
from mcp_server.bundle.uvindex import PASSED_VARS, index_args
from mcp_server.errors import InvalidInput, SetupError
from mcp_server.fsutil import read_file, real_path
from mcp_server.source.config import CONFIG_NAME

STEP = "init"
SERVER_NAME = "automl-setup"
SERVER_SCRIPT = "automl-setup-mcp"
SKILL_DIRS: dict[Agent, str] = {"claude": ".claude/skills", "codex": ".agents/skills"}
CLIENTS: dict[Agent, str] = {"claude": "Claude Code", "codex": "Codex"}
Format = Literal["file", "json", "toml"]
CODEX_STARTUP_TIMEOUT_S, CODEX_TOOL_TIMEOUT_S = 20, 1800


@dataclass(frozen=True)
class Target:
    """One thing init owns: a whole file (`key` empty) or an entry of a config file."""

    path: str  # relative to the project, POSIX
    key: tuple[str, ...]
    label: str
    format: Format
    value: Any  # what init writes: a file's bytes, an entry's data (write only)
    executable: bool = False
    plan: Literal["write", "remove", "keep"] = "write"  # keep: recorded, not in this run

    @property
    def is_server(self) -> bool:
        return self.format != "file" and self.key[-1:] == (SERVER_NAME,)

    @property
    def wanted(self) -> Any:
        return self.value if self.plan == "write" else None

    def digest(self, value: Any) -> str | None:
        if value is None:
            return None
        return file_digest(value) if self.format == "file" else entry_digest(value)

    @property
    def where(self) -> str:
        return self.path if not self.key else f"{self.path} {'.'.join(self.key)}"


def skill_targets(bundle: Bundle, agent: Agent) -> list[Target]:
    folder = SKILL_DIRS[agent]
    label = f"skill file for {CLIENTS[agent]}"
    return [
        Target(f"{folder}/{f.path}", (), label, "file", f.data, f.executable) for f in bundle.files
    ]


def server_target(agent: Agent, command: list[str]) -> Target:
    """The server entry init owns for `agent` (by key: bundle/members.py)."""
    indexed = "--index" in command[1:] and command[0] == "uvx"
    if agent == "claude":
        # No credential variables named here: Claude Code starts a server with the user's
        # whole environment, and reports a `${VAR}` that is unset as an error.
        claude: dict[str, Any] = {"type": "stdio", "command": command[0], "args": command[1:]}
        key = ("mcpServers", SERVER_NAME)
        return Target(".mcp.json", key, "MCP server for Claude Code", "json", claude)
    # An install fetches, builds and installs: Codex's default tool timeout (60 s) is too short.
    value: dict[str, Any] = {
        "command": command[0],
        "args": command[1:],
        # uvx may first fetch and install the pinned version: give it the time.
        "startup_timeout_sec": UVX_STARTUP_TIMEOUT_S
        if command[0] == "uvx"
        else CODEX_STARTUP_TIMEOUT_S,
        "tool_timeout_sec": CODEX_TOOL_TIMEOUT_S,
    }
    if indexed:  # Codex passes a server only the variables it is told: the index's login
        value["env_vars"] = list(PASSED_VARS)
    key = ("mcp_servers", SERVER_NAME)
    return Target(".codex/config.toml", key, "MCP server for Codex", "toml", value)


def engine_target(project: Path, engine: dict[str, str]) -> Target:
    """The engine table of the project file: `automl-setup.toml` when there is one, else the
    `[tool.automl-setup.engine]` table of pyproject.toml, else a new automl-setup.toml."""
    label = "engine of the project file"
    if (project / CONFIG_NAME).exists() or not (project / "pyproject.toml").exists():
        return Target(CONFIG_NAME, ("engine",), label, "toml", engine)
    return Target("pyproject.toml", ("tool", "automl-setup", "engine"), label, "toml", engine)


UVX_STARTUP_TIMEOUT_S = 180
Launcher = Literal["path", "uvx"]
LAUNCHERS: tuple[Launcher, ...] = ("path", "uvx")
DISTRIBUTION = "automl-setup"


def server_command(launcher: Launcher, index: str | None = None) -> list[str]:
    """The server entry's command: this installation's own script by absolute path, or `uvx`
    pinned to exactly this version (the same on every machine: a team can commit it), from
    the team's index when one is named (bundle/uvindex.py)."""
    if launcher == "uvx":
        from_index = index_args(index) if index is not None else []
        return ["uvx", *from_index, "--from", f"{DISTRIBUTION}=={__version__}", SERVER_SCRIPT]
    return default_server_command()


def uvx_pin(value: Any) -> str | None:
    """The version a `uvx [--index ...] --from automl-setup==X automl-setup-mcp` entry is
    pinned to."""
    if not isinstance(value, dict) or value.get("command") != "uvx":
        return None
    args = value.get("args")
    if not isinstance(args, list) or "--from" not in args[:-1]:
        return None
    name, sep, version = str(args[args.index("--from") + 1]).partition("==")
    return version if sep and name == DISTRIBUTION else None


def outdated_pin(value: Any) -> str | None:
    """Why a uvx entry is stale: it starts another version than the running automl-setup (the
    remedy keeps the entry's index: an init without it writes the entry without one)."""
    pinned = uvx_pin(value)
    if pinned is None or pinned == __version__:
        return None
    args = [str(a) for a in value["args"]]
    given = [b.partition("=")[2] for a, b in itertools.pairwise(args) if a == "--index"]
    again = "".join(f" --index {url}" for url in given[:1])
    return (
        f"it starts automl-setup {pinned} (uvx --from {DISTRIBUTION}=={pinned}), and this is "
        f"automl-setup {__version__}: `automl-setup init --launcher uvx{again}` pins it to "
        f"{__version__}"
    )


def default_server_command() -> list[str]:
    """The absolute `automl-setup-mcp` of the installation running init: it works without an
    activated environment, and no other automl-setup on PATH stands in for it."""
    script = Path(sysconfig.get_path("scripts")) / SERVER_SCRIPT
    if not os.access(script, os.X_OK):
        found = shutil.which(SERVER_SCRIPT)
        raise SetupError(
            STEP,
            f"this installation has no {SERVER_SCRIPT} beside its interpreter ({script})",
            "reinstall automl-setup (uv tool install automl-setup, or pip), or name the "
            f"server's command: --mcp-command {found or SERVER_SCRIPT}",
        )
    return [str(script)]


def refuse_launcher_and_command(launcher: str | None, command: list[str] | None) -> Launcher:
    """The launcher asked for (path when none); refused beside an explicit --mcp-command."""
    if launcher is not None and command is not None:
        raise InvalidInput(
            STEP,
            "--launcher and --mcp-command both name the server's command",
            "give one of them: --launcher uvx for the pinned uvx command, or --mcp-command CMD",
        )
    return "uvx" if launcher == "uvx" else "path"


def check_server_command(command: list[str]) -> list[str]:
    if not command or not command[0] or any(not part.isprintable() for part in command):
        raise InvalidInput(
            STEP,
            "--mcp-command needs a command (and its arguments), printable text only",
            "for example: --mcp-command automl-setup-mcp",
        )
    return command


def missing_command(value: Any) -> str | None:
    """Why a server entry's command cannot start (None: it can, as far as a file tells)."""
    command = value.get("command") if isinstance(value, dict) else None
    if not isinstance(command, str):
        return "the entry names no command"
    if Path(command).is_absolute() and not os.access(command, os.X_OK):
        return f"its command {command} does not exist (or is not executable)"
    return None


# --- reading and writing ------------------------------------------------------------------


def link_on_the_way(project: Path, rel: str) -> str | None:
    """The first symbolic link on the way to `rel` (why init will not write through it)."""
    path = project
    for part in Path(rel).parts:
        path = path / part
        if path.is_symlink():
            target = path.readlink()
            try:  # real_path: Path.resolve() judges a symlink loop differently on each version
                inside = real_path(path).is_relative_to(project)
                where = "inside the project" if inside else "outside the project"
            except OSError:  # ELOOP
                where = "a symlink loop"
            return f"{path} is a symbolic link to {target} ({where}); init writes real files only"
    return None


def unparsable(target: Target, exc: Exception) -> SetupError:
    return SetupError(
        STEP,
        f"cannot read {target.path}: {exc}; nothing was written",
        f"fix {target.path} (init merges into it, keeping everything else), then run init again",
    )


def entry_format(path: str, key: tuple[str, ...]) -> Format:
    """How a recorded thing is read: a whole file, or an entry of a JSON or TOML file."""
    return "file" if not key else "json" if path.endswith(".json") else "toml"


def read_owned(project: Path) -> tuple[InitRecord | None, bool]:
    """The ownership record, and whether it was 0.1.0's (carried forward from the entries in
    the project now: bundle/members.py; init writes it in today's format)."""
    record = read_record(project)
    if not isinstance(record, InitRecordV1):
        return record, False

    def current(path: str, key: tuple[str, ...]) -> Any:
        return read_current(project, Target(path, key, "", entry_format(path, key), None))

    return carried_forward(record, current), True


def read_current(project: Path, target: Target) -> Any:
    """What is there now: a file's bytes, an entry's data; None when absent."""
    data = read_file(project / target.path)
    if target.format == "file" or data is None:
        return data
    try:
        text = data.decode("utf-8")
        if target.format == "json":
            return get_member(text, (target.key[0], target.key[1]))
        return get_table(text, target.key)
    except (UnicodeDecodeError, JsonEditError, TomlEditError) as exc:
        raise unparsable(target, exc) from None


def new_bytes(project: Path, target: Target, value: Any) -> bytes:
    """The file's bytes with `value` written: a whole file, or the file with the entry `value`
    merged in (every other byte kept)."""
    if target.format == "file":
        return bytes(value)
    data = read_file(project / target.path)
    text = "" if data is None else data.decode("utf-8")
    try:
        if target.format == "json":
            merged = set_member(text or "{}\n", (target.key[0], target.key[1]), value)
        else:
            merged = set_table(text, target.key, value)
    except (JsonEditError, TomlEditError) as exc:
        raise unparsable(target, exc) from None
    return merged.encode("utf-8")
