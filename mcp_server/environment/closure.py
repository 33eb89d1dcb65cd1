"""The engine's requirement closure, exactly as installed: every distribution its requirements
reach (its installed extras and the target's own markers, recursively), each by version, RECORD
digest and PEP 610 origin, so that a dependency moved under the same version number is a
different engine environment.

Read from the target's site-packages directly (the probe names the folders and the marker
values): metadata and RECORD files only, no file hashing, so the check costs a few
milliseconds. A VCS dependency is recorded by the commit it resolved to; one whose
requirement named no commit is a moving reference, flagged."""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import json
import re
from collections.abc import Iterable, Iterator
from email.parser import HeaderParser
from pathlib import Path
from typing import Any, Literal

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from pydantic import Field, PrivateAttr

from mcp_server.persisted import Persisted
from mcp_server.redact import strip_credentials

_FULL_COMMIT = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
# Files an installer writes about the install itself: the same distribution installed by another
# installer, requested directly or pulled in, is the same distribution.
_FIRST_INSTALL_FILES = ("INSTALLER", "REQUESTED", "RECORD", "direct_url.json")
# uv's note of where it took a local wheel from is about the install too.
INSTALL_FILES = (*_FIRST_INSTALL_FILES, "uv_cache.json")
# A script the installer writes into the environment's scripts folder starts with that
# environment's interpreter: the same distribution in another environment hashes otherwise.
_SCRIPT = re.compile(r"^(\.\./)+(bin|Scripts)/[^/]+$")


class DirectUrl(Persisted):
    """A distribution's PEP 610 `direct_url.json`, credentials stripped from its URL."""

    url: str = Field(description="Where it was installed from, credentials stripped.")
    kind: Literal["vcs", "archive", "dir"] = Field(description="vcs, archive or dir (PEP 610).")
    vcs: str | None = Field(description="git, hg, ... for a VCS dependency.")
    commit_id: str | None = Field(description="The commit a VCS dependency resolved to.")
    requested_revision: str | None = Field(description="The revision its requirement named.")
    subdirectory: str | None = Field(
        description="Subdirectory of the source it was built from; null: the root."
    )
    archive_hash: str | None = Field(description="An archive's hash, as `sha256=...`.")
    editable: bool = Field(description="Whether it was installed in editable mode.")

    def pep610(self) -> dict[str, Any]:
        """The `direct_url.json` this was read from (less stripped credentials)."""
        data: dict[str, Any] = {"url": self.url}
        if self.kind == "vcs":
            info = {"vcs": self.vcs, "commit_id": self.commit_id}
            if self.requested_revision is not None:
                info["requested_revision"] = self.requested_revision
            data["vcs_info"] = info
        elif self.kind == "archive":
            data["archive_info"] = {}
            if self.archive_hash:
                algorithm, _, value = self.archive_hash.partition("=")
                data["archive_info"] = {"hash": self.archive_hash, "hashes": {algorithm: value}}
        else:
            data["dir_info"] = {"editable": True} if self.editable else {}
        if self.subdirectory is not None:
            data["subdirectory"] = self.subdirectory
        return data


class ClosureMember(Persisted):
    version: str = Field(description="Installed version.")
    record_sha256: str | None = Field(
        description="sha256 of its RECORD's hashed entries (sorted; less the installer's own "
        "files, bytecode and the scripts written into the environment's scripts folder, whose "
        "first line names the environment's interpreter): which files, with which contents; "
        "null without a RECORD. The first records with a closure kept those scripts and uv's "
        "uv_cache.json in; their digest is compared as it was computed."
    )
    installer: str | None = Field(
        description="What installed it (its INSTALLER file); null without one."
    )
    direct_url: DirectUrl | None = Field(description="Where it came from, if not an index.")
    moving: bool = Field(
        description="Resolved from a moving reference: a VCS requirement naming no commit, an "
        "archive without a hash, or a local directory."
    )
    # Found in an environment: its RECORD's text, for the digest as the first records with a
    # closure computed it (such a record's digest is compared with it; computed only then).
    _record_text: str | None = PrivateAttr(None)

    def first_digest(self) -> str | None:
        """Its RECORD's digest as the first records with a closure computed it."""
        text = self._record_text
        return None if text is None else record_digest(text, first=True)

    def record_matches(self, recorded: str | None) -> bool:
        return recorded == self.record_sha256 or (
            recorded is not None and recorded == self.first_digest()
        )

    def identity(self) -> dict[str, Any]:
        """What makes it the same distribution: not who installed it, nor the revision its
        requirement named (the same commit reached through a branch name or pinned is the
        same), nor the flag derived from that."""
        fields = self.model_dump(exclude={"installer", "moving"})
        if fields["direct_url"] is not None:
            fields["direct_url"].pop("requested_revision")
        return fields

    def origin(self) -> str:
        d = self.direct_url
        if d is None:
            return "the package index"
        if d.kind == "vcs":
            named = f"@{d.requested_revision}" if d.requested_revision else " (no revision)"
            return f"{d.vcs}+{d.url}{named} -> commit {d.commit_id}"
        return f"{d.kind} {d.url}" + (f" {d.archive_hash}" if d.archive_hash else "")


Closure = dict[str, ClosureMember]


def record_digest(text: str, *, first: bool = False) -> str:
    """The digest of a RECORD; `first` computes it as the first records with a closure did
    (scripts and uv's cache note included)."""
    skipped = _FIRST_INSTALL_FILES if first else INSTALL_FILES
    rows = []
    for row in csv.reader(io.StringIO(text)):
        if len(row) < 2 or not row[1]:
            continue  # bytecode and RECORD itself carry no hash
        path = row[0]
        if path.rsplit("/", 1)[-1] in skipped and ".dist-info/" in path:
            continue
        if not first and path.startswith("../") and _SCRIPT.match(path):
            continue
        rows.append(f"{path},{row[1]}")
    return hashlib.sha256("\n".join(sorted(rows)).encode()).hexdigest()


def parse_direct_url(raw: str | None) -> DirectUrl | None:
    if not raw:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("url"), str):
        return None
    # The key names the kind: an archive without a hash has an empty `archive_info`.
    kind: Literal["vcs", "archive", "dir"] = (
        "vcs" if "vcs_info" in data else "archive" if "archive_info" in data else "dir"
    )
    vcs, archive = data.get("vcs_info") or {}, data.get("archive_info") or {}
    hashes = archive.get("hashes") or {}
    archive_hash = archive.get("hash") or (
        f"sha256={hashes['sha256']}" if "sha256" in hashes else None
    )
    return DirectUrl(
        url=strip_credentials(data["url"]),
        kind=kind,
        vcs=vcs.get("vcs"),
        commit_id=vcs.get("commit_id"),
        requested_revision=vcs.get("requested_revision"),
        subdirectory=data.get("subdirectory"),
        archive_hash=archive_hash,
        editable=bool((data.get("dir_info") or {}).get("editable")),
    )


def _moving(direct: DirectUrl | None) -> bool:
    if direct is None:
        return False
    if direct.kind == "vcs":
        revision = direct.requested_revision or ""
        return not (_FULL_COMMIT.match(revision) and revision == direct.commit_id)
    return direct.kind == "dir" or direct.archive_hash is None


class _Site:
    """The dist-info folders of an environment's site-packages, by canonical name."""

    def __init__(self, folders: list[Path]) -> None:
        self.dists: dict[str, Path] = {}
        for folder in dict.fromkeys(folders):
            try:
                entries = list(folder.iterdir())
            except OSError:
                continue
            for entry in entries:
                if entry.name.endswith(".dist-info"):
                    name = canonicalize_name(entry.name[: -len(".dist-info")].split("-", 1)[0])
                    self.dists.setdefault(name, entry)

    def member(self, name: str) -> tuple[ClosureMember, list[str]] | None:
        """The member and its Requires-Dist, or None when it is not installed."""
        folder = self.dists.get(name)
        if folder is None:
            return None
        # The headers end at the first blank line: a long description (numpy's, pandas') after
        # it is never fed to the parser.
        head = (_read(folder / "METADATA") or "").split("\n\n", 1)[0]
        meta = HeaderParser().parsestr(head, headersonly=True)
        record = _read(folder / "RECORD")
        direct = parse_direct_url(_read(folder / "direct_url.json"))
        member = ClosureMember(
            version=str(meta.get("Version", "")),
            record_sha256=record_digest(record) if record is not None else None,
            installer=(_read(folder / "INSTALLER") or "").strip() or None,
            direct_url=direct,
            moving=_moving(direct),
        )
        member._record_text = record
        return member, list(meta.get_all("Requires-Dist") or [])


def dist_info_dir(site_folders: list[Path], name: str) -> Path | None:
    """The dist-info folder of the installed distribution `name` (canonical), if any."""
    return _Site(site_folders).dists.get(canonicalize_name(name))


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def parsed_requirements(requires: Iterable[str]) -> Iterator[Requirement]:
    """Each `Requires-Dist` that parses (one that does not was never installable either)."""
    for spec in requires:
        parsed = _parsed(spec)
        if parsed is not None:
            yield parsed


@functools.lru_cache(maxsize=4096)
def _parsed(spec: str) -> Requirement | None:
    """A closure is read twice in an install (record, then verify): its hundreds of
    Requires-Dist lines are parsed once. Callers only read the result."""
    try:
        return Requirement(spec)
    except InvalidRequirement:
        return None


def _active(requires: list[str], markers: dict[str, str], extras: set[str]) -> list[Requirement]:
    """The requirements that apply here: markers evaluated with the target's values, for no
    extra and for each extra asked of the distribution."""
    active = []
    for req in parsed_requirements(requires):
        marker: Marker | None = req.marker
        if marker is None or any(
            marker.evaluate({**markers, "extra": extra}) for extra in ("", *sorted(extras))
        ):
            active.append(req)
    return active


def read_closure(
    site_folders: list[Path],
    markers: dict[str, str],
    root: str,
    root_requires: list[str],
    extras: list[str],
) -> Closure:
    """Every installed distribution the requirements of `root` reach, `root` itself excluded
    (its identity is the build); a requirement not installed is absent from the closure."""
    site = _Site(site_folders)
    closure: Closure = {}
    asked: dict[str, set[str]] = {}
    queue = [(req, canonicalize_name(root)) for req in _active(root_requires, markers, set(extras))]
    while queue:
        req, _by = queue.pop()
        name = canonicalize_name(req.name)
        new_extras = set(req.extras) - asked.get(name, set())
        if name in asked and not new_extras:
            continue
        asked.setdefault(name, set()).update(req.extras)
        if name == canonicalize_name(root):
            continue
        found = site.member(name)
        if found is None:
            continue
        member, requires = found
        closure[name] = member
        queue += [(r, name) for r in _active(requires, markers, asked[name])]
    return dict(sorted(closure.items()))


def moving_members(closure: Closure | None) -> list[str]:
    return [name for name, m in (closure or {}).items() if m.moving]


def closure_identity(closure: Closure | None) -> dict[str, Any] | None:
    return None if closure is None else {name: m.identity() for name, m in closure.items()}
