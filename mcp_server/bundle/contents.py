"""The skills this installation of automl-setup carries, read through importlib.resources.

The wheel holds the canonical `skills/` folder as package data (`mcp_server/bundled_skills`,
pyproject's force-include). An editable install has no such package data: its skills are its
project's `skills/` folder, which the distribution's own PEP 610 record names (`dir_info`
editable), so a checkout's `init` writes what the wheel built from it would."""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path
from urllib.parse import unquote, urlsplit

from mcp_server import __version__
from mcp_server.errors import SetupError
from mcp_server.skills.sync import listing_digest

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable
else:  # pragma: no cover - exercised on 3.10 only
    from importlib.abc import Traversable

PACKAGE_DATA = "bundled_skills"
DISTRIBUTION = "automl-setup"
STEP = "read the bundled skills"


@dataclass(frozen=True)
class BundledFile:
    path: str  # POSIX path under the skills folder: "<skill>/SKILL.md"
    data: bytes
    executable: bool

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@dataclass(frozen=True)
class Bundle:
    """Every file of every bundled skill, and where they were read from."""

    version: str
    origin: str
    files: tuple[BundledFile, ...]

    @property
    def skills(self) -> list[str]:
        return sorted({f.path.split("/", 1)[0] for f in self.files})

    @property
    def sha256(self) -> str:
        return listing_digest((f.path, f.sha256) for f in self.files)


def _walk(root: Traversable, prefix: str = "") -> Iterator[BundledFile]:
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        rel = f"{prefix}{entry.name}"
        if entry.is_dir():
            yield from _walk(entry, rel + "/")
        elif entry.is_file():
            # A wheel's files are real paths; a zipped package has no mode to keep.
            mode = entry.stat().st_mode if isinstance(entry, Path) else 0
            yield BundledFile(rel, entry.read_bytes(), bool(mode & 0o100))


def _editable_project() -> Path | None:
    """The project folder of an editable install of automl-setup, from its direct_url.json."""
    try:
        raw = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    info = json.loads(raw) if raw else {}
    url = urlsplit(str(info.get("url", "")))
    if not info.get("dir_info", {}).get("editable") or url.scheme != "file":
        return None
    return Path(unquote(url.path))


def skills_root() -> tuple[Traversable, str]:
    """The folder of the bundled skills and a description of where it is."""
    packaged = resources.files("mcp_server") / PACKAGE_DATA
    if packaged.is_dir():
        return packaged, f"the automl-setup {__version__} package"
    project = _editable_project()
    if project is not None and (project / "skills").is_dir():
        return project / "skills", f"the editable install's project ({project / 'skills'})"
    raise SetupError(
        STEP,
        f"this installation of automl-setup {__version__} carries no skills "
        f"(no {PACKAGE_DATA} package data)",
        "reinstall automl-setup from its wheel: uv tool install automl-setup (or pip install)",
    )


def read_bundle() -> Bundle:
    root, origin = skills_root()
    files = tuple(_walk(root))
    if not files:
        raise SetupError(STEP, f"{origin} holds no skill files", "reinstall automl-setup")
    return Bundle(__version__, origin, files)
