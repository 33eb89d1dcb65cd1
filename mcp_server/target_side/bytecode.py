"""Bytecode, judged and written by the environment's own interpreter (its magic number, cache tag
and compiler). `bytecode.py compile` (environment/precompile.py, the install): stdin a JSON list
of sources; each without up-to-date bytecode is compiled and its file written whole under a
temporary name, then renamed into place; stdout {"compiled": N}, or with "error": [errno,
strerror, filename] and exit 1. `bytecode.py check` (environment/bytecode.py, verify --deep):
stdin {"sources": [...], "recorded": [...]}; stdout [[pyc, problem], ...] for each bytecode
file no RECORD lists that Python would load and that is not what its source compiles to."""

from __future__ import annotations

import contextlib
import json
import marshal
import os
import sys
from importlib._bootstrap_external import _code_to_timestamp_pyc  # type: ignore[attr-defined]
from importlib.util import MAGIC_NUMBER, cache_from_source, source_hash
from typing import Any


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


def write_whole(path: str, data: bytes) -> None:
    """`data` into `path`, whole or not at all: a short write is continued (CPython's own writer
    does not), a full disk raises, and the temporary file goes."""
    tmp = f"{path}.{os.getpid()}.tmp"
    view = memoryview(data)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        try:
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def compile_missing(sources: list[str]) -> dict[str, Any]:
    """Compile each of `sources` without up-to-date bytecode: {"compiled": N}, with "error" at
    the first write that failed."""
    done = 0
    try:
        for source in sources:
            pyc = cache_from_source(source)
            if current(source, pyc):
                continue
            st = os.stat(source)
            with open(source, "rb") as f:
                text = f.read()
            try:
                code = compile(text, source, "exec", dont_inherit=True)
            except (SyntaxError, ValueError):
                continue  # no import of it could succeed either
            os.makedirs(os.path.dirname(pyc), exist_ok=True)
            write_whole(pyc, bytes(_code_to_timestamp_pyc(code, st.st_mtime, st.st_size)))
            done += 1
    except OSError as exc:
        error = [exc.errno, exc.strerror or str(exc), exc.filename or ""]
        return {"compiled": done, "error": error}
    return {"compiled": done}


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
    if argv[1:] == ["compile"]:
        answer = compile_missing(json.load(sys.stdin))
        print(json.dumps(answer))
        return 1 if "error" in answer else 0
    if argv[1:] == ["check"]:
        job = json.load(sys.stdin)
        print(json.dumps(stray(job["sources"], job["recorded"])))
        return 0
    print("usage: bytecode.py compile|check < job.json", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
