"""Real file systems that fail the way shared storage does: a small tmpfs filled with a ballast
file (ENOSPC), the same tmpfs remounted read-only (EROFS), and a btrfs subvolume on a loop
device whose qgroup limit is used up (EDQUOT: this kernel has no CONFIG_QUOTA, so neither ext4
nor tmpfs quotas exist here; btrfs qgroups bind root too). Mounting needs root: without it, or
without btrfs-progs, a test is skipped with the reason, and failed where
AUTOML_REQUIRE_MOUNTS=1 (CI)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REQUIRE_ENV = "AUTOML_REQUIRE_MOUNTS"
BALLAST = "ballast"


def unavailable(reason: str) -> None:
    """Skip the test, or fail it where the mounts are required."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)


def _must(*argv: str) -> None:
    done = _run(*argv)
    if done.returncode != 0:
        unavailable(f"`{' '.join(argv)}` failed here: {done.stderr.strip()}")


@contextlib.contextmanager
def tmpfs(mount: Path, size: str = "96m") -> Iterator[Path]:
    """A tmpfs of `size` at `mount`, unmounted afterwards (also on failure)."""
    if os.geteuid() != 0:
        unavailable("mounting a file system needs root")
    mount.mkdir(parents=True, exist_ok=True)
    _must("mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount))
    try:
        yield mount
    finally:
        _run("umount", "-l", str(mount))


def fill(mount: Path, leave: int) -> Path:
    """A ballast file taking all but about `leave` bytes of the file system."""
    stats = os.statvfs(mount)
    free = stats.f_bavail * stats.f_frsize
    ballast = mount / BALLAST
    with ballast.open("wb") as out:
        os.posix_fallocate(out.fileno(), 0, max(1, free - leave))
    return ballast


@dataclass
class Fault:
    """A file system at `root` that `apply` makes fail with `strerror` and `lift` heals; the
    remedy of a refusal there names `tool`."""

    name: str
    root: Path
    strerror: str
    tool: str
    mount: Path

    def apply(self) -> None:
        if self.name == "full":
            fill(self.mount, leave=4096)
        elif self.name == "read-only":
            _must("mount", "-o", "remount,ro", str(self.mount))
        else:
            _qgroup_limit(self.root, f"{_referenced(self.root) + (64 << 10)}")

    def lift(self) -> None:
        if self.name == "full":
            (self.mount / BALLAST).unlink()
        elif self.name == "read-only":
            _must("mount", "-o", "remount,rw", str(self.mount))
        else:
            _qgroup_limit(self.root, "none")


FAULTS = ["full", "quota", "read-only"]


@contextlib.contextmanager
def faulty_fs(name: str, base: Path) -> Iterator[Fault]:
    """A healthy file system for the fault `name` (one of FAULTS), under `base`."""
    if name != "quota":
        with tmpfs(base / "fs") as mount:
            strerror = "No space left on device" if name == "full" else "Read-only file system"
            tool = "df -h" if name == "full" else "findmnt -T"
            yield Fault(name, mount, strerror, tool, mount)
        return
    with btrfs(base) as mount:
        sub = mount / "quota"
        _must("btrfs", "subvolume", "create", str(sub))
        yield Fault(name, sub, "Disk quota exceeded", "quota -s", mount)


@contextlib.contextmanager
def btrfs(base: Path) -> Iterator[Path]:
    """A 512 MB btrfs on a loop device with quotas enabled, unmounted and detached afterwards."""
    if os.geteuid() != 0:
        unavailable("mounting a file system needs root")
    if shutil.which("mkfs.btrfs") is None:
        unavailable("btrfs-progs is not installed (apt-get install btrfs-progs)")
    image, mount = base / "btrfs.img", base / "btrfs"
    with image.open("wb") as out:
        out.truncate(512 << 20)
    _must("mkfs.btrfs", "-q", str(image))
    mount.mkdir()
    _must("mount", "-o", "loop", str(image), str(mount))  # the loop device is freed on umount
    try:
        _must("btrfs", "quota", "enable", str(mount))
        yield mount
    finally:
        _run("umount", str(mount))
        image.unlink(missing_ok=True)


def _referenced(subvolume: Path) -> int:
    """The bytes the subvolume's qgroup holds now, after a commit."""
    _must("btrfs", "filesystem", "sync", str(subvolume))
    _must("btrfs", "quota", "rescan", "-w", str(subvolume))
    done = _run("btrfs", "qgroup", "show", "--raw", "-f", str(subvolume))
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith("0/")]
    return int(rows[0][1])


def _qgroup_limit(subvolume: Path, limit: str) -> None:
    _must("btrfs", "qgroup", "limit", limit, str(subvolume))
