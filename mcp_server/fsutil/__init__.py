"""The one file-access package for automl-setup's state: atomic replace, exclusive create,
fsynced append-only JSON lines, locks, logs, and the reads of them.

State lives on shared storage that other people may write (a team's workspace, a shared venv),
so no access here follows a link planted in a state directory, and no state is trusted that
others could have rewritten:

- A state file is opened relative to a descriptor of its directory, with `O_NOFOLLOW`, and
  `O_CREAT | O_EXCL` where it is created. The directory itself is reached from the *edge* (the
  workspace, the environment or the store, which may be links: resolved once, here) one
  component at a time with `O_DIRECTORY | O_NOFOLLOW`: every component from the first
  `.automl-setup` on (or the last one, for a state folder of another name). A link found on
  the way is refused, naming it and where it points; nothing is written or read through it.
- A state directory or file writable by everyone (a sticky folder such as /tmp aside), or owned
  by someone other than this user, root or the owner of its directory, is refused (as ssh's
  StrictModes treats `~/.ssh`), unless that directory is a team's: group-writable, the entry
  in its group. New directories get the umask's mode.
- Temporary files are created exclusively under an unpredictable name in the target's own
  directory, fsynced, renamed into place, and the directory fsynced.
"""

from __future__ import annotations

from mcp_server.fsutil.files import (
    atomic_write_bytes,
    copy_new_at,
    create_new_or_same,
    exclusive_create,
    locked_directory,
    probe_writable,
    write_new_at,
)
from mcp_server.fsutil.ledgers import (
    JsonLines,
    append_json_line,
    numbered_append,
    read_json_lines,
)
from mcp_server.fsutil.locks import (
    exclusive_holder,
    exclusive_lock,
    open_lock,
    shared_lock,
)
from mcp_server.fsutil.realpath import real_path
from mcp_server.fsutil.statedir import (
    STATE_DIR_NAME,
    io_failure,
    new_directory,
    open_log,
    open_reader,
    open_state,
    read_file,
    state_dir,
)
from mcp_server.fsutil.storage import storage_cause, storage_refusals, storage_remedy

__all__ = [
    "STATE_DIR_NAME",
    "JsonLines",
    "append_json_line",
    "atomic_write_bytes",
    "copy_new_at",
    "create_new_or_same",
    "exclusive_create",
    "exclusive_holder",
    "exclusive_lock",
    "io_failure",
    "locked_directory",
    "new_directory",
    "numbered_append",
    "open_lock",
    "open_log",
    "open_reader",
    "open_state",
    "probe_writable",
    "read_file",
    "read_json_lines",
    "real_path",
    "shared_lock",
    "state_dir",
    "storage_cause",
    "storage_refusals",
    "storage_remedy",
    "write_new_at",
]
