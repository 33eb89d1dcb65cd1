"""The bytecode cache: every `.pyc` an install compiles is kept, content-addressed, beside the
wheel store (`<store>/bytecode/<interpreter>/<source sha256>-<pyc sha256 prefix>.pyc`), and
the next environment holding the same source under the same interpreter gets it by a hard
link (a copy where no link can be made: another file system; always a copy for the engine's
own files, as cachelinks.py gives them) instead of a compile (target_side/bytecode.py
`compile`, precompile.py). A dependency's pyc edited in place through its link edits the cache
entry and every environment linked to it, as uv's own links do: the entry is found and
replaced at the next use, and verify --deep finds it in an engine. One compiled file serves every
environment: the code's file name is fixed up on load when its source lives elsewhere
(`_imp._fix_co_filename`), and verify --deep's comparison of code objects ignores it.

The folder trusts what the store trusts (the same root, `AUTOML_SETUP_STORE` or
`$XDG_CACHE_HOME/automl-setup`, opened from it without following a link and refused when
others could have written it: fsutil's `state_dir`); its entries are opened through its
descriptor, never through a link, and only this user's are used. The interpreter's folder is
named by its implementation, full version and platform: the same magic number across patch
releases may still compile differently, and verify --deep compares against what this very
interpreter compiles. Entries are read-only; an entry is used only when its bytes hash to its
name (a cut or edited file does not), its magic number is this interpreter's and it is a
checked-hash pyc of exactly this source; one in 64 is also unmarshalled and compared with its
source. A bad one is removed and compiled again. A cache that cannot be opened or written is
skipped, never a refusal: the environment's own bytecode is written whole either way.

Which kind of pyc (PEP 552). A timestamp pyc embeds its source's mtime and size: a linked copy
is stale wherever the other install gave the source another mtime (uv copies keep the wheel's
times, an editable or a `cp` need not), and Python then ignores it and, with `-B`, compiles
in memory at every start. Both hash-based kinds embed the source's hash instead and stay valid
wherever the same bytes are. Unchecked ones are loaded without reading the source at all, so
an edited source would silently run its old code (and verify --deep would be the only one to
notice); checked ones cost a read and a SipHash of the source at import.
bench/pyckinds.py measures that cost: `-I -B` importing this project's MCP server
(`mcp.server.mcpserver`: 586 modules, from a closure of 10,177 pycs), median of 11, on this
2-core machine under a load average of about 7 (other work: a spread of about 10 %):
timestamp 1654 ms, checked hash 1501 ms, unchecked hash 1420 ms, no bytecode 2246 ms. The
source's hash costs less than the noise; bytecode at all is what counts (1.36x without).
Checked-hash pycs: correct for every environment they are linked into, at that cost."""

from __future__ import annotations

import re
from pathlib import Path

from mcp_server.environment.probe import Probe
from mcp_server.environment.wheelstore import store_root
from mcp_server.errors import SetupError
from mcp_server.fsutil import state_dir

FOLDER = "bytecode"
NOT_A_NAME = re.compile(r"[^a-z0-9.]+")


def interpreter_key(probe: Probe) -> str:
    """The cache folder's name for the probed interpreter, e.g. `cpython-3.11.2-linux-x86-64`."""
    text = f"{probe.implementation}-{probe.python_version}-{probe.platform}".lower()
    return NOT_A_NAME.sub("-", text).strip("-.")


def cache_folder(probe: Probe, root: Path | None = None) -> tuple[Path | None, str]:
    """The probed interpreter's cache folder, made and checked (under `root`, else the store's
    root), or None and why it cannot serve."""
    top = root or store_root()
    folder = top / FOLDER / interpreter_key(probe)
    try:
        with state_dir(folder, step="install", create=True, edge=top):
            pass
    except SetupError as exc:
        return None, exc.cause
    return folder, ""
