"""What a child's process tree is doing, for the watchdog: its processes, what each read and
wrote and its CPU time (psutil), and the TCP connections it holds open to a peer with the bytes
that arrived on each.

psutil reads the tree, the counters and the connections. The bytes received on a connection
(tcp_info's `tcpi_bytes_received`) have no psutil equivalent: they are asked of the kernel's
socket diagnostics by hand (netlink sock_diag, as `ss -i` reads them), on Linux only; elsewhere,
or where the kernel does not say, a connection's count is None and nothing is claimed. Where a
process's I/O counters cannot be read (not Linux), `readable()` is False and the watchdog stands
aside: only each step's overall time limit applies.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

import psutil

from mcp_server.redact import redact_text


@dataclass(frozen=True)
class ProcessSample:
    read: int  # bytes read (sockets and pipes included)
    written: int  # bytes written
    cpu: float  # seconds (user + system)


def readable() -> bool:
    """Whether this platform gives a process's I/O counters (Linux: /proc/<pid>/io)."""
    try:
        psutil.Process().io_counters()
    except (AttributeError, psutil.Error, OSError):
        return False
    return True


def _tree(pid: int) -> list[psutil.Process]:
    """`pid` and every process below it (uv spawns from worker threads: a child's parent is
    the process, whichever thread started it)."""
    try:
        top = psutil.Process(pid)
        return [top, *top.children(recursive=True)]
    except psutil.Error:  # gone
        return []


def sample_tree(pid: int) -> dict[int, ProcessSample]:
    samples = {}
    for one in _tree(pid):
        with contextlib.suppress(psutil.Error, OSError):  # gone, or not ours to read
            with one.oneshot():
                io, cpu = one.io_counters(), one.cpu_times()
            # read_chars/write_chars (rchar/wchar) count socket and pipe traffic too.
            read = getattr(io, "read_chars", io.read_bytes)
            written = getattr(io, "write_chars", io.write_bytes)
            samples[one.pid] = ProcessSample(read, written, cpu.user + cpu.system)
    return samples


# --------------------------------------------------------------------------------------------
# What it waits on: its open TCP connections


_STATES = {psutil.CONN_ESTABLISHED: "established", psutil.CONN_SYN_SENT: "connecting"}
# Both ends of a connection, as the kernel has them: (local address, port, peer address, port).
Ends = tuple[
    ipaddress.IPv4Address | ipaddress.IPv6Address,
    int,
    ipaddress.IPv4Address | ipaddress.IPv6Address,
    int,
]


@dataclass(frozen=True)
class Connection:
    peer: str  # host:port as the kernel has it (an address, not the name)
    state: str
    process: str  # the process holding it, and its command line (redacted, shortened)
    received: int | None  # bytes that arrived on it (None: the kernel did not say)


def _shown(address: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int) -> str:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped  # an IPv4 peer of an IPv6 socket
    return f"[{address}]:{port}" if address.version == 6 else f"{address}:{port}"


def _command(process: psutil.Process) -> str:
    try:
        argv = process.cmdline()
    except (psutil.Error, OSError):
        return "?"
    if not argv:
        return "?"
    text = redact_text(" ".join([Path(argv[0]).name, *(a for a in argv[1:] if a)]))
    return text if len(text) <= 160 else text[:159] + "…"


def connections(pid: int) -> list[Connection]:
    """The TCP connections the tree below `pid` holds open to a peer."""
    held: list[tuple[psutil.Process, Ends, str]] = []
    for one in _tree(pid):
        with contextlib.suppress(psutil.Error, OSError):
            for conn in one.net_connections(kind="tcp"):
                if conn.status in _STATES and conn.raddr:
                    ends = (
                        ipaddress.ip_address(conn.laddr.ip), conn.laddr.port,
                        ipaddress.ip_address(conn.raddr.ip), conn.raddr.port,
                    )  # fmt: skip
                    held.append((one, ends, _STATES[conn.status]))
    received = _bytes_received({ends for _one, ends, _state in held})
    return [
        Connection(_shown(ends[2], ends[3]), state, _command(one), received.get(ends))
        for one, ends, state in held
    ]


# The kernel's socket diagnostics: struct inet_diag_msg (family, state, timer, retrans, then
# inet_diag_sockid: sport, dport big-endian, src and dst 16 bytes each), its attributes after
# 72 bytes; tcp_info's tcpi_bytes_received (Linux >= 4.1) at 128 in INET_DIAG_INFO.
_NETLINK_SOCK_DIAG, _SOCK_DIAG_BY_FAMILY, _INET_DIAG_INFO = 4, 20, 2
_NLM_F_REQUEST, _NLM_F_DUMP, _NLMSG_ERROR, _NLMSG_DONE = 1, 0x300, 2, 3
_PORTS_AT, _SRC_AT, _DST_AT, _ATTRS_AT, _BYTES_RECEIVED_AT = 4, 8, 24, 72, 128


def _bytes_received(wanted: set[Ends]) -> dict[Ends, int]:
    found: dict[Ends, int] = {}
    if not wanted or not hasattr(socket, "AF_NETLINK"):  # not Linux: the kernel is not asked
        return found
    for family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError, struct.error):
            found.update(_diag_dump(family, wanted))
    return found


def _diag_dump(family: int, wanted: set[Ends]) -> dict[Ends, int]:
    request = struct.pack(
        "=BBBBI", family, socket.IPPROTO_TCP, 1 << (_INET_DIAG_INFO - 1), 0, 0xFFFFFFFF
    ) + bytes(48)  # struct inet_diag_req_v2: every state, any address
    header = struct.pack(
        "=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST | _NLM_F_DUMP, 1, 0
    )
    width = 4 if family == socket.AF_INET else 16
    found: dict[Ends, int] = {}
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
                sport, dport = struct.unpack_from("!HH", message, _PORTS_AT)
                ends = (
                    ipaddress.ip_address(message[_SRC_AT : _SRC_AT + width]), sport,
                    ipaddress.ip_address(message[_DST_AT : _DST_AT + width]), dport,
                )  # fmt: skip
                if ends in wanted:
                    received = _tcp_info_received(message)
                    if received is not None:
                        found[ends] = received
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
