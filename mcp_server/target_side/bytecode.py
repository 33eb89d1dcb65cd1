"""Bytecode, judged and written by the environment's own interpreter (its magic number, cache tag
and compiler). `bytecode.py compile [CACHE]` (environment/precompile.py, the install): stdin a
JSON list of sources (with CACHE: {"sources": [...], "copied": [...]}); each without up-to-date
bytecode is linked (copied: the engine's own) from the bytecode cache CACHE
(environment/bytecache.py: checked-hash pycs named by their source's sha256) or compiled, its
file written whole under a temporary name, then renamed into place (and into CACHE); stdout
{"compiled": N} (with a cache also "linked": N and "dropped": [[entry, why], ...]), or with
"error": [errno, strerror, filename] and exit 1. `bytecode.py check` (environment/bytecode.py,
verify --deep): stdin {"sources": [...], "recorded": [...]}; stdout [[pyc, problem], ...] for
each bytecode file no RECORD lists that Python would load and that is not what its source
compiles to."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import marshal
import os
import re
import stat
import sys
from importlib._bootstrap_external import _code_to_hash_pyc  # type: ignore[attr-defined]
from importlib.util import MAGIC_NUMBER, cache_from_source, source_hash
from typing import Any

CHECKED_HASH = 3  # PEP 552 flags: hash-based (1), checked against the source (2)
ENTRY = re.compile(r"^([0-9a-f]{64})-([0-9a-f]{32})\.pyc$")  # source sha256 - the pyc's own
SAMPLE = 64  # one linked entry in SAMPLE is also unmarshalled and compared with its source
# Where a hard link cannot be made the file is copied: another file system, a link limit.
NO_LINK = (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.EACCES, errno.ENOTSUP)


def loaded(source: str, data: bytes) -> bool:
    """Whether Python would run the bytecode `data` (its first 16 bytes suffice) in place of
    `source`: importlib's own header checks."""
    if len(data) < 16 or data[:4] != MAGIC_NUMBER:
        return False
    flags = int.from_bytes(data[4:8], "little")
    if flags & 1:
        if not flags & 2:  # unchecked hash-based: always loaded
            return True
        with open(source, "rb") as f:
            return data[8:16] == source_hash(f.read())
    st = os.stat(source)
    return (
        int.from_bytes(data[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
        and int.from_bytes(data[12:16], "little") == st.st_size & 0xFFFFFFFF
    )


def current(source: str, pyc: str) -> bool:
    """Whether `pyc` exists and Python would load it for `source`."""
    try:
        with open(pyc, "rb") as f:
            return loaded(source, f.read(16))
    except OSError:
        return False


def write_whole(path: str, data: bytes, dir_fd: int | None = None, mode: int = 0o644) -> None:
    """`data` into `path` (in the folder `dir_fd`, never through a link), whole or not at all:
    a short write is continued (CPython's own writer does not), a full disk raises, and the
    temporary file goes."""
    tmp = f"{path}.{os.getpid()}.tmp"
    view = memoryview(data)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    fd = os.open(tmp, flags, mode, dir_fd=dir_fd)
    try:
        try:
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, path, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def entry_problem(name: str, data: bytes, text: bytes, deep: bool) -> str | None:
    """Why the cache entry `name` holding `data` must not serve the source `text`: None when
    it is whole (its bytes hash to its name), of this interpreter (magic number) and a
    checked-hash pyc of exactly this source; with `deep`, also when its code is what the
    source compiles to."""
    if hashlib.sha256(data).hexdigest()[:32] != name[65:97]:
        return "cut short or edited: its bytes do not hash to its name"
    if data[:4] != MAGIC_NUMBER:
        return f"compiled by another interpreter (magic number {data[:4].hex()})"
    if int.from_bytes(data[4:8], "little") != CHECKED_HASH or data[8:16] != source_hash(text):
        return "not a checked-hash pyc of this source"
    if deep:
        try:
            code = marshal.loads(data[16:])  # noqa: S302 - our own cache, checked above
        except Exception as exc:
            return f"damaged ({type(exc).__name__}: {exc})"
        if code != compile(text, "<cache>", "exec", dont_inherit=True):
            return "not compiled from its source"
    return None


class Cache:
    """The bytecode cache folder for this interpreter (environment/bytecache.py made it and
    checked its trust): entries are read and written through its descriptor, never through a
    link, and only regular files of this user are used."""

    def __init__(self, folder: str) -> None:
        self.fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        self.entries: dict[str, str] = {}
        for name in os.listdir(self.fd):
            match = ENTRY.match(name)
            if match:
                self.entries.setdefault(match.group(1), name)
        self.linked = 0
        self.dropped: list[list[str]] = []
        self.writable = True

    def get(self, digest: str, text: bytes) -> tuple[str, bytes] | None:
        """The entry of the source `text` (sha256 `digest`) that may be linked, and its bytes; a
        damaged one is dropped (unlinked here; its hard links elsewhere are verify --deep's to
        find)."""
        name = self.entries.get(digest)
        if name is None:
            return None
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=self.fd)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
                return None  # not ours: neither used nor removed
            with os.fdopen(os.dup(fd), "rb") as f:
                data = f.read()
        finally:
            os.close(fd)
        deep = self.linked % SAMPLE == 0
        problem = entry_problem(name, data, text, deep)
        if problem is None:
            return name, data
        self.dropped.append([name, problem])
        del self.entries[digest]
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=self.fd)
        return None

    def put(self, digest: str, data: bytes) -> str | None:
        """`data` as the entry of `digest`, written whole and read-only; None where the cache
        cannot take it (then the install writes its own copy: the cache is never a refusal)."""
        if not self.writable:
            return None
        name = f"{digest}-{hashlib.sha256(data).hexdigest()[:32]}.pyc"
        try:
            write_whole(name, data, dir_fd=self.fd, mode=0o444)
        except OSError:
            self.writable = False
            return None
        self.entries[digest] = name
        return name

    def place(self, name: str, data: bytes, pyc: str, copy: bool) -> None:
        """The entry `name` (holding `data`) into place as `pyc`, whole: hard-linked under a
        temporary name and renamed, or, with `copy` or where no link can be made, copied."""
        if copy:
            write_whole(pyc, data)
            return
        tmp = f"{pyc}.{os.getpid()}.tmp"
        try:
            os.link(name, tmp, src_dir_fd=self.fd, follow_symlinks=False)
        except OSError as exc:
            if exc.errno not in NO_LINK:
                raise OSError(exc.errno, exc.strerror, pyc) from None
            write_whole(pyc, data)
            return
        try:
            os.replace(tmp, pyc)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


def open_cache(folder: str) -> Cache | None:
    """The cache, or None where it is gone or unreadable now: compiled without it."""
    try:
        return Cache(folder)
    except OSError:
        return None


def compile_missing(
    sources: list[str], cache: Cache | None = None, copied: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """Each of `sources` without up-to-date bytecode gets a checked-hash pyc, linked from
    `cache` (copied for the sources in `copied`: the engine's own, which an edit in place must
    not carry into the cache) or compiled (and put into it): {"compiled": N} (with a cache also
    "linked" and "dropped"), with "error" at the first write into the environment that
    failed."""
    done = 0
    answer: dict[str, Any] = {}
    try:
        for source in sources:
            pyc = cache_from_source(source)
            if current(source, pyc):
                continue
            with open(source, "rb") as f:
                text = f.read()
            digest = hashlib.sha256(text).hexdigest()
            found = cache.get(digest, text) if cache is not None else None
            if found is not None and cache is not None:
                os.makedirs(os.path.dirname(pyc), exist_ok=True)
                cache.place(*found, pyc, source in copied)
                cache.linked += 1
                continue
            try:
                code = compile(text, source, "exec", dont_inherit=True)
            except (SyntaxError, ValueError):
                continue  # no import of it could succeed either
            data = bytes(_code_to_hash_pyc(code, source_hash(text), True))
            os.makedirs(os.path.dirname(pyc), exist_ok=True)
            name = cache.put(digest, data) if cache is not None else None
            if name is not None and cache is not None:
                cache.place(name, data, pyc, source in copied)
            else:
                write_whole(pyc, data)
            done += 1
    except OSError as exc:
        answer["error"] = [exc.errno, exc.strerror or str(exc), exc.filename or ""]
    answer["compiled"] = done
    if cache is not None:
        answer.update(linked=cache.linked, dropped=cache.dropped)
    return answer


def problem(source: str, pyc: str, level: int) -> str | None:
    """What is wrong with the bytecode `pyc` of `source` at optimization `level`: None when
    Python would not load it or it is exactly what the source compiles to."""
    try:
        with open(pyc, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return "unreadable: " + str(exc.strerror)
    if not loaded(source, data):
        return None
    try:
        # What Python itself would unmarshal and run from this environment's own files.
        code = marshal.loads(data[16:])  # noqa: S302
    except Exception as exc:
        return f"cut short or damaged ({type(exc).__name__}: {exc})"
    with open(source, "rb") as f:
        text = f.read()
    if code != compile(text, source, "exec", dont_inherit=True, optimize=level):
        return "not compiled from its source: Python runs it instead"
    return None


def stray(sources: list[str], recorded: list[str]) -> list[list[str]]:
    """[pyc, problem] for each bytecode file of `sources` (at every optimization level) that no
    RECORD lists (`recorded`) and that has a problem."""
    listed, found = set(recorded), []
    for source in sources:
        for level in (0, 1, 2):
            pyc = cache_from_source(source, optimization=level or "")
            if pyc not in listed:
                said = problem(source, pyc, level)
                if said is not None:
                    found.append([pyc, said])
    return found


def main(argv: list[str]) -> int:
    if argv[1:2] == ["compile"] and len(argv) <= 3:
        job = json.load(sys.stdin)
        if len(argv) == 3:  # {"sources": [...], "copied": [...]}
            answer = compile_missing(job["sources"], open_cache(argv[2]), frozenset(job["copied"]))
        else:
            answer = compile_missing(job)
        print(json.dumps(answer))
        return 1 if "error" in answer else 0
    if argv[1:] == ["check"]:
        job = json.load(sys.stdin)
        print(json.dumps(stray(job["sources"], job["recorded"])))
        return 0
    print(
        "usage: bytecode.py compile|check < job.json (compile CACHE: through the bytecode cache)",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
