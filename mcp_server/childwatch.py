"""Children that may wait on a network (git, the ssh and https helpers git starts, uv and the git
uv starts): never a terminal, never a prompt, and given up on after a bounded time without
progress, naming what they waited on.

No prompt by construction, not by overriding the user's choices: every such child starts in a
session of its own (no controlling terminal, so neither ssh nor git can open /dev/tty), and no
askpass program is ever run. The user's `core.sshCommand`, `~/.ssh/config`, agent, credential
helpers and certificate settings stay in force.

Progress is what the child's process tree reads and writes (`/proc/<pid>/io`: a socket read
counts, a compiler's output too) or a child starting or ending; a process working its CPU hard
(a build) counts as well. An idle poll loop does not: curl wakes up a few times a second while
a server sends nothing, which is far below the CPU share that counts. Where /proc is missing
(not Linux) only each step's overall time limit applies.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import socket
import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from mcp_server.redact import redact_text

DEFAULT_STALL_S = 30.0
MIN_STALL_S = 1.0
MAX_STALL_S = 3600.0
SAMPLE_S = 0.5
# A process that used at least this share of a core since the last sample is working.
BUSY_SHARE = 0.2
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
T = TypeVar("T")
# Tell the user what is awaited after this long without progress, then this often.
FIRST_WORD_S = 5.0

# git and ssh never ask anything: no terminal prompt, no askpass program (git's own, ssh's,
# the Git Credential Manager's). git falls back to SSH_ASKPASS only when GIT_ASKPASS is unset:
# set empty, it names no program.
NO_PROMPT = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_ASKPASS": "",
    "SSH_ASKPASS_REQUIRE": "never",
    "GCM_INTERACTIVE": "never",
}


@dataclass(frozen=True)
class NetworkWatch:
    """How long a network child may go without progress, and where to say what it waits on
    (`progress(step, message)`, the operation's own progress sink)."""

    stall_s: float = DEFAULT_STALL_S
    progress: Callable[[str, str], None] | None = None


_WATCH: ContextVar[NetworkWatch | None] = ContextVar("network_watch", default=None)


@contextlib.contextmanager
def network_watch(
    stall_s: float | None, progress: Callable[[str, str], None] | None = None
) -> Iterator[NetworkWatch]:
    """The watch every network child started inside this block uses (an operation sets it from
    its request; `None`: the default bound)."""
    watch = NetworkWatch(DEFAULT_STALL_S if stall_s is None else stall_s, progress)
    token = _WATCH.set(watch)
    try:
        yield watch
    finally:
        _WATCH.reset(token)


def current_watch() -> NetworkWatch:
    return _WATCH.get() or NetworkWatch()


# --------------------------------------------------------------------------------------------
# What a process tree is doing


@dataclass(frozen=True)
class ProcessSample:
    read: int  # bytes read (rchar: sockets and pipes included)
    written: int  # bytes written (wchar)
    cpu: int  # clock ticks (user + system)


def _descendants(pid: int) -> list[int]:
    """`pid` and every process below it (each thread's children: uv spawns from worker
    threads)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{current}/task").iterdir():
                with contextlib.suppress(OSError):
                    text = (task / "children").read_text()
                    todo += [int(child) for child in text.split()]
    return found


def _sample(pid: int) -> ProcessSample | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        io = Path(f"/proc/{pid}/io").read_text()
    except OSError:  # gone, or not ours to read
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    counters = dict(line.split(": ", 1) for line in io.splitlines() if ": " in line)
    return ProcessSample(
        int(counters.get("rchar", 0)),
        int(counters.get("wchar", 0)),
        int(fields[11]) + int(fields[12]),
    )


def sample_tree(pid: int) -> dict[int, ProcessSample]:
    samples = {}
    for one in _descendants(pid):
        sample = _sample(one)
        if sample is not None:
            samples[one] = sample
    return samples


# --------------------------------------------------------------------------------------------
# What it waits on: its open TCP connections


_TCP_STATES = {"01": "established", "02": "connecting"}


@dataclass(frozen=True)
class Connection:
    peer: str  # host:port as the kernel has it (an address, not the name)
    state: str
    process: str  # the process holding it, and its command line (redacted, shortened)
    received: int | None  # bytes that arrived on it (None: the kernel did not say)


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = str(fd.readlink())
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    return inodes


def _address(text: str) -> str:
    """A /proc/net/tcp{,6} address (hex, host byte order per 32-bit word) as host:port."""
    host, port = text.split(":")
    raw = bytes.fromhex(host)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    if len(words) == 4:
        return f"{'.'.join(str(b) for b in words)}:{int(port, 16)}"
    if words[:12] == b"\0" * 10 + b"\xff\xff":  # an IPv4 peer of an IPv6 socket
        return f"{'.'.join(str(b) for b in words[12:])}:{int(port, 16)}"
    groups = ":".join(words[i : i + 2].hex() for i in range(0, 16, 2))
    return f"[{groups}]:{int(port, 16)}"


def _tcp_table() -> dict[str, tuple[str, str]]:
    """inode -> (peer, state) of this network namespace's TCP sockets that wait on a peer."""
    table = {}
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(name).read_text().splitlines()[1:]:
                parts = line.split()
                if len(parts) > 9 and parts[3] in _TCP_STATES:
                    table[parts[9]] = (_address(parts[2]), _TCP_STATES[parts[3]])
    return table


def _command(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    words = [Path(argv[0].decode(errors="replace")).name] + [
        a.decode(errors="replace") for a in argv[1:] if a
    ]
    text = redact_text(" ".join(words))
    return text if len(text) <= 160 else text[:159] + "…"


def connections(pid: int) -> list[Connection]:
    """The TCP connections the tree below `pid` holds open to a peer."""
    table = _tcp_table()
    held = [(one, inode) for one in _descendants(pid) for inode in sorted(_socket_inodes(one))]
    received = _bytes_received({inode for _one, inode in held if inode in table})
    return [
        Connection(*table[inode], _command(one), received.get(inode))
        for one, inode in held
        if inode in table
    ]


# The kernel's socket diagnostics (netlink sock_diag, as `ss -i` reads them): tcp_info's
# tcpi_bytes_received (Linux >= 4.1) of each socket, by inode.
_NETLINK_SOCK_DIAG, _SOCK_DIAG_BY_FAMILY, _INET_DIAG_INFO = 4, 20, 2
_NLM_F_REQUEST, _NLM_F_DUMP, _NLMSG_ERROR, _NLMSG_DONE = 1, 0x300, 2, 3
_INODE_AT, _ATTRS_AT, _BYTES_RECEIVED_AT = 68, 72, 128


def _bytes_received(inodes: set[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    if not inodes:
        return found
    for family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError, struct.error):
            found.update(_diag_dump(family, inodes))
    return found


def _diag_dump(family: int, inodes: set[str]) -> dict[str, int]:
    request = struct.pack(
        "=BBBBI", family, socket.IPPROTO_TCP, 1 << (_INET_DIAG_INFO - 1), 0, 0xFFFFFFFF
    ) + bytes(48)  # struct inet_diag_req_v2: every state, any address
    header = struct.pack(
        "=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST | _NLM_F_DUMP, 1, 0
    )
    found: dict[str, int] = {}
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as diag:
        diag.settimeout(2.0)
        diag.sendall(header + request)
        while True:
            data, at = diag.recv(1 << 16), 0
            while at + 16 <= len(data):
                length, kind = struct.unpack_from("=IH", data, at)
                if kind in (_NLMSG_DONE, _NLMSG_ERROR) or length < 16:
                    return found
                message = data[at + 16 : at + length]
                inode = str(struct.unpack_from("=I", message, _INODE_AT)[0])
                if inode in inodes:
                    received = _tcp_info_received(message)
                    if received is not None:
                        found[inode] = received
                at += (length + 3) & ~3


def _tcp_info_received(message: bytes) -> int | None:
    at = _ATTRS_AT
    while at + 4 <= len(message):
        length, kind = struct.unpack_from("=HH", message, at)
        if length < 4:
            return None
        if kind == _INET_DIAG_INFO and length - 4 >= _BYTES_RECEIVED_AT + 8:
            return int(struct.unpack_from("=Q", message, at + 4 + _BYTES_RECEIVED_AT)[0])
        at += (length + 3) & ~3
    return None


# --------------------------------------------------------------------------------------------
# The watchdog


@dataclass
class Stall:
    """What a child that stopped making progress was waiting on."""

    idle_s: float
    bound_s: float
    connections: list[Connection]

    def describe(self) -> str:
        if self.connections:
            peers = "; ".join(f"{c.peer} ({c.state}, {c.process})" for c in self.connections)
            waited = f"waiting on {peers}"
        else:
            waited = "with no connection open (waiting on a name lookup or a local process)"
        counts = [c.received for c in self.connections]
        if not counts or None in counts:  # the kernel did not say: nothing claimed
            return f"no progress for {self.idle_s:.0f} s, {waited}"
        total = sum(c for c in counts if c is not None)
        received = (
            f"{_size(total)} had arrived on it before it went quiet"
            if total
            else "nothing had arrived on it"
        )
        return f"no progress for {self.idle_s:.0f} s, {waited}; {received}"


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} bytes"
    if count < 1 << 20:
        return f"{count / 1024:.1f} KiB"
    return f"{count / (1 << 20):.1f} MiB"


class Stalled(Exception):
    def __init__(self, stall: Stall) -> None:
        super().__init__(stall.describe())
        self.stall = stall


@dataclass
class Watchdog:
    """Samples a child's process tree; `check()` raises `Stalled` once nothing moved for
    `stall_s`, and tells `say` what it waits on while it waits."""

    pid: int
    stall_s: float
    say: Callable[[str], None] | None = None
    last: dict[int, ProcessSample] = field(default_factory=dict)
    quiet_since: float = field(default_factory=time.monotonic)
    sampled_at: float = field(default_factory=time.monotonic)
    next_word: float = FIRST_WORD_S
    enabled: bool = field(default_factory=lambda: Path("/proc/self/io").exists())

    def check(self) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        samples = sample_tree(self.pid)
        if self._progressed(samples, now - self.sampled_at):
            self.quiet_since, self.next_word = now, FIRST_WORD_S
        self.last, self.sampled_at = samples, now
        idle = now - self.quiet_since
        if idle >= self.stall_s:
            raise Stalled(self._stall(idle))
        if idle >= self.next_word and self.say is not None:
            self.next_word = idle + FIRST_WORD_S
            self.say(f"{self._stall(idle).describe()}; giving up at {self.stall_s:.0f} s")

    def _stall(self, idle: float) -> Stall:
        return Stall(idle, self.stall_s, connections(self.pid))

    def _progressed(self, samples: dict[int, ProcessSample], elapsed: float) -> bool:
        if samples.keys() != self.last.keys():
            return True  # a process started or ended
        busy = BUSY_SHARE * _TICKS * max(elapsed, SAMPLE_S)
        return any(
            (s.read, s.written) != (self.last[pid].read, self.last[pid].written)
            or s.cpu - self.last[pid].cpu >= busy
            for pid, s in samples.items()
        )


def wait_watched(
    proc: subprocess.Popen[Any],
    timeout: float,
    step: str,
    wait: Callable[[float], T],
    reap: Callable[[], object],
) -> T:
    """`wait(seconds)` for the child `proc` (started in a session of its own) until it returns,
    watched under the running operation's stall bound, its progress sink told what it waits on
    as `step`. A stall (`Stalled`), the time limit (`subprocess.TimeoutExpired`) or an
    interruption kills the child's whole session and `reap`s it before the exception goes on."""
    watch = current_watch()
    say = None if watch.progress is None else functools.partial(watch.progress, step)
    watchdog = Watchdog(proc.pid, watch.stall_s, say)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                return wait(max(0.0, min(SAMPLE_S, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    raise
                watchdog.check()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        reap()
        raise
