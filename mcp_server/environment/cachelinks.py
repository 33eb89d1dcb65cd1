"""The environment's files and uv's cache: which may share bytes with it, and how an edited
shared file is put right in both.

uv installs a wheel by linking its files from the wheel unpacked in its cache (copy-on-write
clones on macOS, hard links elsewhere; a copy where the cache is on another file system).
Copying the whole closure instead (numpy, scipy, ... hundreds of MB) was most of an install
with heavy dependencies, so the dependencies stay linked; the engine's own files get copies
of their own (`own_copies`), so an edit in place never reaches the cache and a reinstall
restores the recorded bytes. A dependency file edited through its link edits the cache entry
too: `verify --deep` finds it, and `restore_commands` are the remedy for both.
"""

from __future__ import annotations

import contextlib
import secrets
import shlex
import shutil
import stat
import sys
from pathlib import Path

from mcp_server.children.uv import uv_binary
from mcp_server.environment.closure import ClosureMember

# Where uv shares bytes with its cache at no cost to the cache: a clone is copy-on-write (an
# edit stays in the environment); a hard link is the same file (own_copies undoes it for the
# engine). Named explicitly, so no UV_LINK_MODE or uv.toml makes it `symlink`.
LINK_MODE = "clone" if sys.platform == "darwin" else "hardlink"


def own_copies(paths: list[Path], prefix: Path) -> int:
    """Give every file of `paths` (a distribution's RECORD) that is hard-linked (shares its
    bytes with uv's cache, or anything else) a copy of its own, by copy and rename: the path
    never names a partial file. Returns how many were copied."""
    copied = 0
    for path in paths:
        if not path.is_relative_to(prefix):  # a RECORD may name anything; ours is inside
            continue
        try:
            st = path.lstat()
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(st.st_mode) or st.st_nlink < 2:
            continue
        tmp = path.with_name(f".{path.name}.own-{secrets.token_hex(6)}")
        try:
            with path.open("rb") as src, tmp.open("xb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
            shutil.copymode(path, tmp)
            tmp.replace(path)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        copied += 1
    return copied


def requirement(name: str, member: ClosureMember) -> str:
    """The requirement that installs exactly this member again: its version from an index,
    its commit from its repository, its archive or folder from its URL."""
    direct = member.direct_url
    if direct is None:
        return f"{name}=={member.version}"
    url = f"{direct.vcs}+{direct.url}@{direct.commit_id}" if direct.kind == "vcs" else direct.url
    sub = f"#subdirectory={direct.subdirectory}" if direct.subdirectory else ""
    return f"{name} @ {url}{sub}"


def restore_commands(
    edited: dict[str, ClosureMember], interpreter: Path, prefix: Path
) -> list[str]:
    """Commands that put edited closure members right, in the environment and in uv's cache:
    `uv cache clean` removes the cache entries (a file linked from there was edited with it,
    and uv would link the edited bytes again, even on a reinstall when offline); the reinstall
    then fetches each member afresh, alone (`--no-deps`: nothing else moves); `verify --deep`
    checks the result."""
    if not edited:
        return []
    names = sorted(edited)
    specs = " ".join(shlex.quote(requirement(n, edited[n])) for n in names)
    again = " ".join(f"--reinstall-package {n}" for n in names)
    python = shlex.quote(str(interpreter))
    uv = shlex.quote(uv_binary())  # automl-setup's own uv: its cache layout is the install's
    return [
        f"{uv} cache clean {' '.join(names)}",
        f"{uv} pip install --python {python} --no-deps {again} {specs}",
        f"automl-setup verify --deep --python {shlex.quote(str(prefix))}",
    ]
