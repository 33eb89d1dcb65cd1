"""`automl-setup init`: the bundled skills and the MCP server in a user's project.

Plan first, write after: every thing init would write is judged against the project and the
ownership record (bundle/ownership.py); if anything is someone else's, or was edited since init
wrote it, init refuses naming each with its difference, and nothing is written. Otherwise it
writes what is new or stale (atomic replace; merges keep every other byte of a config file),
removes what it wrote that the bundle no longer has, and writes the record last. A run that
finds everything current writes nothing at all."""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.bundle import members
from mcp_server.bundle.contents import Bundle, read_bundle
from mcp_server.bundle.ownership import (
    AGENTS,
    RECORD_PATH,
    Agent,
    InitRecord,
    Judged,
    OwnedItem,
    State,
    judge,
    write_record,
)
from mcp_server.bundle.targets import (
    SKILL_DIRS,
    STEP,
    Launcher,
    Target,
    engine_target,
    entry_format,
    link_on_the_way,
    missing_command,
    new_bytes,
    outdated_pin,
    read_current,
    read_owned,
    server_command,
    server_target,
    skill_targets,
)
from mcp_server.bundle.uvindex import effective_index
from mcp_server.errors import ExitCode, InvalidInput, SetupError
from mcp_server.fsutil import atomic_write_bytes, io_failure
from mcp_server.source.profile import load_profile
from mcp_server.values import RepositoryUrl

DIFF_LINES = 40
Action = Literal["created", "updated", "restored", "removed", "recorded", "unchanged", "kept"]
_ACTIONS: dict[State, Action] = {
    State.NEW: "created",
    State.STALE: "updated",
    State.MISSING: "restored",
    State.RETIRED: "removed",
}


@dataclass(frozen=True)
class InitRequest:
    project: Path
    agents: tuple[Agent, ...] = AGENTS
    check: bool = False
    mcp_command: list[str] | None = None  # None: the launcher's command
    launcher: Launcher = "path"  # this installation's automl-setup-mcp, or uvx pinned to it
    index: str | None = None  # checked (uvindex.check_index); None: the project file's, if any
    engine: dict[str, str] | None = None  # repository, and optionally the other profile fields


class InitItem(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    path: str = Field(description="The file, relative to the project.")
    key: list[str] = Field(description="The entry inside it; empty for the whole file.")
    label: str
    state: State = Field(description="How it stood before this run.")
    action: Action = Field(description="What this run did to it (--check: unchanged).")
    detail: str = Field(description="Why it is not current, when it is not.")


class InitResult(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    project: str
    check: bool = Field(description="True for `init --check` (nothing is written).")
    ok: bool = Field(description="--check: everything init owns is current; init: done.")
    bundle_version: str
    bundle_sha256: str
    bundle_origin: str = Field(description="Where the bundled skills were read from.")
    skills: list[str]
    agents: list[Agent]
    mcp_command: list[str] | None = Field(description="The server's command (null: --check).")
    record: str = Field(description="The ownership record.")
    record_found: bool = Field(description="Whether the project had one before this run.")
    items: list[InitItem]


def project_dir(raw: Path) -> Path:
    """The project folder, resolved once here at the edge (it may itself be a link)."""
    if not raw.is_dir():
        what = "does not exist" if not raw.exists() else "is not a directory"
        raise InvalidInput(STEP, f"project {raw} {what}", "pass --project DIR, an existing folder")
    return raw.resolve()


def _engine(engine: dict[str, str]) -> dict[str, str]:
    raw = engine.get("repository", "")
    url = RepositoryUrl(raw)  # refuses a bad URL with its own step, cause and remedy
    if str(url) != raw:
        raise InvalidInput(
            STEP,
            "the repository URL carries credentials; the project file is shared and committed",
            "pass the URL without credentials and let git's credential helper supply them",
        )
    load_profile(table=engine, origin="init")  # every field checked as the profile reads it
    return engine


def _targets(request: InitRequest, bundle: Bundle, record: InitRecord | None) -> list[Target]:
    """What this run would write, then what the record holds beyond it: removed when it is a
    skill file of a client set up here that the bundle no longer has, else kept as it is."""
    index = effective_index(request.project, request.index, request.launcher)
    command = request.mcp_command or (
        None if request.check else server_command(request.launcher, index)
    )
    targets: list[Target] = []
    for agent in request.agents:
        targets += skill_targets(bundle, agent)
        if command is not None:
            targets.append(server_target(agent, command))
    if request.engine is not None:
        targets.append(engine_target(request.project, _engine(request.engine)))
    planned = {(t.path, t.key) for t in targets}
    ours = tuple(SKILL_DIRS[a] + "/" for a in request.agents)
    for item in record.items if record else []:
        key = tuple(item.key)
        if (item.path, key) in planned:
            continue
        fmt = entry_format(item.path, key)
        if not key and item.path.startswith(ours):
            targets.append(
                Target(item.path, key, "skill file no longer bundled", fmt, None, plan="remove")
            )
        elif not request.check or key:
            targets.append(
                Target(item.path, key, "recorded by an earlier init", fmt, None, plan="keep")
            )
    return targets


@dataclass
class _Judgement:
    target: Target
    state: State
    adopt: bool
    detail: str
    current: Any
    value: Any = None  # what init writes: a file's bytes, an entry merged with theirs


def _judge_all(
    request: InitRequest, targets: list[Target], record: InitRecord | None
) -> list[_Judgement]:
    recorded = {(i.path, tuple(i.key)): i for i in record.items} if record else {}
    out: list[_Judgement] = []
    for target in targets:
        link = link_on_the_way(request.project, target.path)
        if link is not None:
            out.append(_Judgement(target, State.FOREIGN, False, link, None))
            continue
        current = read_current(request.project, target)
        item = recorded.get((target.path, target.key))
        value, keys = target.wanted, members.recorded_keys(item)
        if target.format == "file":
            have, rec = target.digest(current), None if item is None else item.sha256
            want = target.digest(value)
        else:  # by key: what someone else added to the entry is theirs (bundle/members.py)
            have, rec, want = members.digests(current, keys, value)
            if value is not None:
                value = members.merged(current, keys or (), value)
        # Kept things, and every entry under --check, are judged by the record alone.
        by_record = target.plan == "keep" or (request.check and target.format != "file")
        judged = judge(have, rec, rec if by_record else want)
        detail = _detail(judged.state, target)
        if judged.state == State.EDITED and keys and isinstance(current, dict):
            detail += f": {', '.join(members.changed(current, keys))}"
        if judged.state == State.CURRENT and target.format != "file" and current is not None:
            why = (missing_command(current) or outdated_pin(current)) if target.is_server else None
            if why is not None:
                judged, detail = Judged(State.STALE), why
        out.append(_Judgement(target, judged.state, judged.adopt, detail, current, value))
    return out


def _detail(state: State, target: Target) -> str:
    return {
        State.CURRENT: "",
        State.NEW: "not written yet",
        State.STALE: "as init wrote it; this bundle has another version",
        State.RETIRED: "as init wrote it; no longer in the bundle",
        State.MISSING: "init wrote it and it is gone",
        State.EDITED: "changed since init wrote it",
        State.FOREIGN: "there already, not written by init",
    }[state] + (f" ({target.label})" if state != State.CURRENT else "")


def _diff(judgement: _Judgement) -> list[str]:
    target = judgement.target

    def lines(value: Any) -> list[str]:
        if value is None:
            return []
        if target.format == "file":
            return bytes(value).decode("utf-8", "replace").splitlines()
        return json.dumps(value, indent=2, sort_keys=True).splitlines()

    diff = list(
        difflib.unified_diff(
            lines(judgement.current),
            lines(judgement.value),
            f"{target.where} (in the project)",
            f"{target.where} (what init writes)",
            lineterm="",
        )
    )
    more = [f"... {len(diff) - DIFF_LINES} more diff lines"] if len(diff) > DIFF_LINES else []
    return diff[:DIFF_LINES] + more


def _refuse(refused: list[_Judgement]) -> SetupError:
    details = []
    for j in refused:
        diff = "" if j.current is None else "\n      " + "\n      ".join(_diff(j))
        details.append(f"{j.target.where}: {j.detail}{diff}")
    return SetupError(
        STEP,
        f"{len(refused)} thing(s) init would write belong to someone else or were changed "
        "since init wrote them; nothing was written",
        "init never overwrites them: keep a local change in a skill or server of your own "
        "name, or delete the file (or entry) to have init write it again; a symbolic link "
        "must become a real folder",
        details=details,
    )


def _apply(project: Path, judgement: _Judgement) -> None:
    target, path = judgement.target, project / judgement.target.path
    if judgement.state == State.RETIRED:
        try:
            path.unlink()
            for folder in path.parents:  # the folders init made for it, once empty
                if folder == project or any(folder.iterdir()):
                    break
                folder.rmdir()
        except OSError as exc:
            raise io_failure("remove", path, exc) from None
        return
    data = new_bytes(project, target, judgement.value)
    mode = 0o755 if target.executable else 0o644
    with contextlib.suppress(FileNotFoundError):
        mode = path.stat().st_mode & 0o7777 if target.format != "file" else mode
    atomic_write_bytes(path, data)
    try:
        path.chmod(mode)
    except OSError as exc:
        raise io_failure("write", path, exc) from None


@contextlib.contextmanager
def _undone_on_failure() -> Iterator[Callable[[Path, Path], None]]:
    """Yield `before(path, project)`, to be called before each file init writes or removes: a
    refusal halfway (a full disk, a quota, a read-only remount) puts every such file back as it
    was and removes the folders made for them, so a refused init leaves the project as it was."""
    kept: list[tuple[Path, bytes | None, int, list[Path]]] = []

    def before(path: Path, project: Path) -> None:
        made = [f for f in path.parents if f.is_relative_to(project) and not f.exists()]
        try:
            kept.append((path, path.read_bytes(), path.stat().st_mode & 0o7777, made))
        except FileNotFoundError:
            kept.append((path, None, 0, made))

    try:
        yield before
    except (SetupError, OSError):
        for path, data, mode, made in reversed(kept):
            with contextlib.suppress(OSError, SetupError):  # the first failure is the one told
                if data is None:
                    path.unlink(missing_ok=True)
                else:
                    atomic_write_bytes(path, data)
                    path.chmod(mode)
                for folder in made:  # innermost first; only while empty
                    folder.rmdir()
        raise


def _record(
    request: InitRequest, bundle: Bundle, judged: list[_Judgement], old: InitRecord | None
) -> InitRecord:
    recorded = {(i.path, tuple(i.key)): i for i in old.items} if old else {}
    items = []
    for j in judged:
        where = (j.target.path, j.target.key)
        if j.target.plan == "keep":
            items.append(recorded[where])
        elif j.target.plan == "write":
            keys = [] if j.target.format == "file" else members.owned_keys(j.target.value)
            digest = j.target.digest(j.target.value)
            items.append(
                OwnedItem(path=j.target.path, key=list(j.target.key), sha256=digest, keys=keys)
            )
    agents: list[Agent] = sorted(set(request.agents) | set(old.agents if old else ()))
    return InitRecord(
        tool_version=bundle.version,
        bundle_sha256=bundle.sha256,
        skills=bundle.skills,
        agents=agents,
        items=sorted(items, key=lambda i: (i.path, i.key)),
        updated_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


def _same(a: InitRecord, b: InitRecord | None) -> bool:
    same = {"updated_at"}
    return b is not None and a.model_dump(exclude=same) == b.model_dump(exclude=same)


def run_init(request: InitRequest) -> InitResult:
    """Set the project up (or, with `check`, judge it only); refuses as a whole, writing
    nothing, when anything it would write is someone else's."""
    link = link_on_the_way(request.project, RECORD_PATH)
    if link is not None:  # neither read nor written through a link
        raise SetupError(STEP, link, f"make {RECORD_PATH} a real file in a real folder")
    bundle = read_bundle()
    record, released = read_owned(request.project)
    if request.check and record is not None and request.agents == AGENTS:
        request = dataclasses.replace(request, agents=tuple(record.agents))
    targets = _targets(request, bundle, record)
    judged = _judge_all(request, targets, record)
    refused = [j for j in judged if j.state.refused]
    if refused and not request.check:
        raise _refuse(refused)
    actions: dict[int, Action] = {}
    if not request.check:
        with _undone_on_failure() as before:
            for n, j in enumerate(judged):
                if j.target.plan == "keep" or j.state not in _ACTIONS:
                    kept: Action | None = "kept" if j.target.plan == "keep" else None
                    actions[n] = kept or ("recorded" if j.adopt else "unchanged")
                    continue
                before(request.project / j.target.path, request.project)
                _apply(request.project, j)
                actions[n] = _ACTIONS[j.state]
            new_record = _record(request, bundle, judged, record)
            if released or not _same(new_record, record):  # 0.1.0's: in today's format
                before(request.project / RECORD_PATH, request.project)
                write_record(request.project, new_record)
    items = [
        InitItem(
            path=j.target.path,
            key=list(j.target.key),
            label=j.target.label,
            state=j.state,
            action=actions.get(n, "unchanged"),
            detail=j.detail,
        )
        for n, j in enumerate(judged)
    ]
    ok = not request.check or (record is not None and all(j.state == State.CURRENT for j in judged))
    server = next(
        (t.value for t in targets if t.label.startswith("MCP") and t.plan == "write"), None
    )
    return InitResult(
        project=str(request.project),
        check=request.check,
        ok=ok,
        bundle_version=bundle.version,
        bundle_sha256=bundle.sha256,
        bundle_origin=bundle.origin,
        skills=bundle.skills,
        agents=list(request.agents),
        mcp_command=None if server is None else [server["command"], *server["args"]],
        record=str(request.project / RECORD_PATH),
        record_found=record is not None,
        items=items,
    )


def exit_code(result: InitResult) -> int:
    return int(ExitCode.OK if result.ok else ExitCode.REFUSED)
