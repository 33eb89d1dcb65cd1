"""A path resolved the way the OS follows it, the same on every Python version.

`Path.resolve()` changed under us: up to 3.12 it raises RuntimeError on a symlink loop, from
3.13 on it returns the loop's path as if it were a plain name (and `os.path.realpath` differs
again between versions, strict or not). A path judged by it (inside a root? inside a checkout?)
would be judged differently by each version, so the links are followed here, one component at
a time, with the kernel's own bound on how many links one lookup may follow."""

from __future__ import annotations

import errno
import os
from pathlib import Path

MAX_LINKS = 40  # Linux's MAXSYMLINKS: a lookup following more fails with ELOOP


def real_path(path: str | Path) -> Path:
    """`path` with `~` expanded and made absolute, every symlink followed and every `..`
    applied after the link before it (as the OS does: it leaves the link's target); a part that
    does not exist (yet) is kept as written. OSError (ELOOP, as the OS says it) when the OS
    could not follow it: a symlink loop, or a chain of more than `MAX_LINKS` links."""
    given = Path(path).expanduser().absolute()
    todo = list(reversed(given.parts[1:]))  # a stack: the next component last
    done = Path(given.anchor)
    links = 0
    while todo:
        name = todo.pop()
        if name == "..":
            done = done.parent
            continue
        here = done / name
        try:
            target = here.readlink()
        except OSError:  # not a link, or not there (yet): a plain component
            done = here
            continue
        links += 1
        if links > MAX_LINKS:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(given))
        todo.extend(reversed(target.parts[1:] if target.is_absolute() else target.parts))
        if target.is_absolute():
            done = Path(target.anchor)
    return done
