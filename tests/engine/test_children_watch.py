"""The stall watchdog on real child processes: one that waits on nothing is given up on after
the bound, one that writes slowly or works its CPU is never cut off, and a silent TCP server
is named as what the child waited on, with nothing received; the bound is the one the call is
given, and a local child (no bound) is held to its time limit alone."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from mcp_server.children.bound import DEFAULT_STALL_S, Watch
from mcp_server.children.causes import stall_refusal
from mcp_server.children.run import run_captured
from mcp_server.children.tree import connections
from mcp_server.children.watch import SAMPLE_S, Stalled, Watchdog

PY = sys.executable


def _watch(argv: list[str], bound: float, limit: float) -> tuple[float, Stalled | None, list[str]]:
    """Run `argv` under a watchdog; how long it ran, the stall if any, what it was told."""
    said: list[str] = []
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True)
    dog = Watchdog(proc.pid, bound, said.append)
    started = time.monotonic()
    try:
        while proc.poll() is None and time.monotonic() - started < limit:
            time.sleep(SAMPLE_S)
            dog.check()
    except Stalled as stall:
        return time.monotonic() - started, stall, said
    finally:
        proc.kill()
        proc.wait()
    return time.monotonic() - started, None, said


def test_a_child_that_waits_on_nothing_is_given_up_on_after_the_bound() -> None:
    took, stall, said = _watch([PY, "-c", "import time; time.sleep(60)"], bound=2.0, limit=20)
    assert stall is not None, "the sleeping child was never found stalled"
    assert 2.0 <= took < 5.0, took
    assert stall.stall.idle_s >= 2.0
    assert stall.stall.connections == []
    assert "no connection open" in stall.stall.describe()
    assert said == []  # the first word comes after 5 s, later than this bound


def test_a_slow_but_moving_writer_is_never_cut_off(tmp_path) -> None:
    out = tmp_path / "slow.txt"
    code = (
        f"import time\nwith open({str(out)!r}, 'w') as f:\n"
        "    for i in range(14):\n        f.write('x'); f.flush(); time.sleep(0.4)\n"
    )
    took, stall, _said = _watch([PY, "-c", code], bound=1.5, limit=20)
    assert stall is None, stall
    assert took >= 5.0  # it ran well past the bound, moving all the time
    assert out.read_text() == "x" * 14


def test_a_process_working_its_cpu_is_progress() -> None:
    code = "import time\nend = time.time() + 4\nwhile time.time() < end: pass\n"
    took, stall, _said = _watch([PY, "-c", code], bound=1.5, limit=20)
    assert stall is None, stall
    assert took >= 3.5


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A listener that accepts and never sends a byte (a wedged server, a dead proxy)."""
    yield from _server(b"")


@pytest.fixture
def quiet_server() -> Iterator[int]:
    """A listener that sends 5,000 bytes on each connection, then nothing more."""
    yield from _server(b"x" * 5000)


def _server(first: bytes) -> Iterator[int]:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        deadline = time.monotonic() + 120
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue
            held[-1].sendall(first)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join()
    for one in held:
        one.close()
    listener.close()


def _reader(port: int) -> list[str]:
    """A child that connects to `port` and reads whatever comes, until the peer closes."""
    code = f"import socket\ns = socket.create_connection(('127.0.0.1', {port}))\n"
    return [PY, "-c", code + "while s.recv(65536):\n    pass\n"]


def test_the_silent_peer_is_named_with_nothing_received(silent_server: int) -> None:
    _took, stall, _said = _watch(_reader(silent_server), bound=2.0, limit=20)
    assert stall is not None
    found = stall.stall.connections
    assert [c.peer for c in found] == [f"127.0.0.1:{silent_server}"], found
    assert found[0].state == "established" and found[0].process.startswith("python")
    assert found[0].received == 0
    text = stall.stall.describe()
    assert f"waiting on 127.0.0.1:{silent_server}" in text and "nothing had arrived on it" in text
    refusal = stall_refusal("fetch", None, stall.stall)
    assert refusal.step == "fetch"
    assert refusal.cause.startswith(f"127.0.0.1:{silent_server} stopped answering")
    assert "--stall-timeout, now 2 s" in refusal.remedy


def test_what_had_arrived_before_it_went_quiet_is_counted(quiet_server: int) -> None:
    _took, stall, _said = _watch(_reader(quiet_server), bound=2.0, limit=20)
    assert stall is not None
    assert [c.received for c in stall.stall.connections] == [5000]
    assert "4.9 KiB had arrived on it before it went quiet" in stall.stall.describe()


def test_what_it_waits_on_is_said_while_it_waits(silent_server: int) -> None:
    _took, stall, said = _watch(_reader(silent_server), bound=7.0, limit=20)
    assert stall is not None
    assert len(said) == 1, said  # at 5 s, before the bound of 7 s
    assert f"waiting on 127.0.0.1:{silent_server}" in said[0] and "giving up at 7 s" in said[0]


def test_connections_lists_only_the_tree_of_the_child(silent_server: int) -> None:
    with socket.create_connection(("127.0.0.1", silent_server)):  # ours, not the child's
        proc = subprocess.Popen([PY, "-c", "import time; time.sleep(30)"])
        try:
            assert connections(proc.pid) == []
        finally:
            proc.kill()
            proc.wait()


def test_a_call_is_held_to_the_bound_it_passes() -> None:
    assert Watch.of(None).stall_s == DEFAULT_STALL_S and Watch.of(5.0).stall_s == 5.0
    sleeper = [PY, "-c", "import time; time.sleep(60)"]
    started = time.monotonic()
    with pytest.raises(Stalled) as caught:
        run_captured(sleeper, timeout=30, step="fetch", watch=Watch(2.0))
    took = time.monotonic() - started
    assert 2.0 <= took < 5.0, took
    assert caught.value.stall.bound_s == 2.0


def test_a_local_child_is_held_to_its_time_limit_alone() -> None:
    quiet = [PY, "-c", "import time; time.sleep(3); print('done')"]
    # Quiet for longer than a 1 s bound would allow: without a bound, it runs to its end.
    assert run_captured(quiet, timeout=30, watch=None).stdout == "done\n"
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_captured([PY, "-c", "import time; time.sleep(60)"], timeout=2.0, watch=None)
    assert 2.0 <= time.monotonic() - started < 5.0
