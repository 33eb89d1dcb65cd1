"""Bytecode written once, at install, for the engine and its dependency closure: every engine
process automl-setup starts runs `-I -B` and writes nothing into the environment (a full disk
at run time cannot poison it), yet starts from bytecode (bench/bytecode.py: without it a start
of the reference engine takes twice as long, every plan, run, status and trial).

Not uv's `--compile-bytecode`: that recompiles the whole site-packages on every install (12x a
plain install of an engine with numpy, scipy, scikit-learn and pandas) and ignores errors,
and CPython's own writer does not check for a short write (a full disk left a truncated `.pyc`
renamed into place). Here only the closure's files without up-to-date bytecode are compiled,
by the environment's own interpreter (target_side/bytecode.py `compile`), each file linked from
the bytecode cache (bytecache.py: a source already compiled by this interpreter, in any
environment, is not compiled again) or compiled, written whole (a short write is continued, a
full disk raises) under a temporary name and renamed into place; a failure refuses the
install, which rolls back."""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from mcp_server.children.run import run_captured
from mcp_server.environment.bytecache import cache_folder
from mcp_server.environment.closure import dist_info_dir
from mcp_server.environment.probe import Probe
from mcp_server.environment.verify import installed_paths
from mcp_server.errors import SetupError
from mcp_server.fsutil import storage_remedy
from mcp_server.fsutil.statedir import IO_REMEDY
from mcp_server.target_side import command

COMPILE_TIMEOUT_S = 1800.0

# A distribution's own test suite (pandas and scipy ship thousands of files) is not imported
# by an engine: it is left out; Python compiles such a file in memory if it ever is imported.
TEST_FOLDERS = frozenset({"tests", "test"})


def closure_sources(site_folders: list[Path], names: list[str], prefix: Path) -> list[str]:
    """The `.py` files the RECORDs of `names` list inside the environment, once each, but a
    test suite's."""
    found: set[str] = set()
    for name in names:
        dist_info = dist_info_dir(site_folders, name)
        if dist_info is not None:
            found.update(
                str(p)
                for p in installed_paths(dist_info)
                if p.suffix == ".py" and prefix in p.parents and not TEST_FOLDERS & set(p.parts)
            )
    return sorted(found)


@dataclass
class Compiled:
    """What a compile did: files compiled, files linked from the cache, and the cache entries
    found damaged and dropped ([entry, why], ...)."""

    compiled: int = 0
    linked: int = 0
    dropped: list[list[str]] = field(default_factory=list)
    uncached: str = ""  # why the cache could not serve, when it could not

    def describe(self) -> str:
        said = f"bytecode: {self.compiled} files compiled, {self.linked} from the cache"
        said += "".join(f"; a damaged cache entry dropped: {n} ({why})" for n, why in self.dropped)
        return said + (f"; the cache was not used: {self.uncached}" if self.uncached else "")


def compile_closure(interpreter: Path, probe: Probe, engine: str, names: list[str]) -> Compiled:
    """Bytecode for the distribution `engine` and its closure `names` in `interpreter`'s
    environment (`probe`), through the cache: the dependencies' files linked (as uv links
    their sources), the engine's copied (cachelinks.py: an edit in place stays there)."""
    site = [probe.purelib, probe.platlib]
    sources = closure_sources(site, [engine, *names], probe.prefix)
    folder, why = cache_folder(probe)
    own = frozenset(closure_sources(site, [engine], probe.prefix))
    done = compile_sources(interpreter, sources, folder, own)
    done.uncached = why
    return done


def compile_sources(
    interpreter: Path,
    sources: list[str],
    cache: Path | None = None,
    copied: frozenset[str] = frozenset(),
) -> Compiled:
    """Bytecode for `sources` without up-to-date bytecode, from the bytecode cache folder
    `cache` where it holds it (copies for `copied`, links for the others), else compiled,
    split over the machine's cores. A write into the environment that fails is a refusal
    naming the file and the storage's remedy."""
    # One process per core once each gets some 50 files: a start costs about what 5 compiles do.
    workers = max(1, min(os.cpu_count() or 1, len(sources) // 50 or 1))
    chunks = [sources[n::workers] for n in range(workers)]
    argv = command(interpreter, "bytecode", "compile", *([str(cache)] * bool(cache)))

    def compile_chunk(chunk: list[str]) -> subprocess.CompletedProcess[str]:
        job = {"sources": chunk, "copied": sorted(copied.intersection(chunk))}
        listing = json.dumps(job if cache else chunk)
        return run_captured(argv, input=listing, timeout=COMPILE_TIMEOUT_S)

    try:  # started together, each given its list on stdin
        with ThreadPoolExecutor(max_workers=workers) as pool:
            procs = list(pool.map(compile_chunk, chunks))
    except subprocess.TimeoutExpired:
        raise SetupError(
            "install",
            f"compiling the engine's bytecode took longer than {COMPILE_TIMEOUT_S:.0f} s",
            "check the machine's load and run the install again",
        ) from None
    done = Compiled()
    for proc in procs:
        try:
            answer = json.loads(proc.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            raise SetupError(
                "install",
                f"compiling the engine's bytecode failed in the environment: {last}",
                "run the install again; if it fails the same way, report it with this line",
            ) from None
        done.compiled += answer["compiled"]
        done.linked += answer.get("linked", 0)
        done.dropped += answer.get("dropped", [])
        if "error" in answer:
            code, strerror, filename = answer["error"]
            raise SetupError(
                "install",
                f"cannot write the bytecode {filename}: {strerror}",
                storage_remedy(code, Path(filename)) or IO_REMEDY,
            )
    return done
