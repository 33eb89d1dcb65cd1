"""Closure members' wheels in the wheel store. A wheel is packed from an installed
distribution: exactly the files its RECORD names, each checked against its RECORD hash, so
that a member of an engine's closure (a VCS dependency built at install time, or any member
`store keep` is asked for) can be installed again with no index, repository or uv cache.

The installer's own files (INSTALLER, REQUESTED, direct_url.json, RECORD, bytecode) are left
out; console scripts are left out too (the installer writes them again from entry_points.txt);
other files outside site-packages go back under `<name>-<version>.data/`. The bytes are
deterministic (sorted names, fixed times): the same installed files pack to the same sha256,
so the store keeps one entry however often they are packed. Installed from the store again,
a member gets back the PEP 610 origin it was packed with, so its closure entry is the bound
one."""

from __future__ import annotations

import configparser
import io
import json
import os
import zipfile
from collections.abc import Iterable
from email.parser import HeaderParser
from pathlib import Path

from mcp_server.environment.closure import INSTALL_FILES, Closure, DirectUrl, dist_info_dir
from mcp_server.environment.records import utc_now
from mcp_server.environment.verify import parse_record_csv
from mcp_server.environment.wheelstore import PackedMember, StoredWheel, WheelEntry, WheelStore
from mcp_server.errors import SetupError
from mcp_server.fsutil import atomic_write_bytes
from mcp_server.source.wheelbuild import record_hash, sha256_file

STEP = "store"
_EPOCH = (1980, 1, 1, 0, 0, 0)
_SCRIPTS = ("bin", "Scripts")


def kept_at_install(closure: Closure) -> list[str]:
    """The members an install keeps in the store: those from a URL (a VCS commit, an archive,
    a folder), which no index can give again by version; not an editable folder (its files
    are the folder)."""
    return [
        name
        for name, m in closure.items()
        if m.direct_url is not None and not m.direct_url.editable
    ]


def keep_members(
    closure: Closure, names: Iterable[str], site: list[Path], prefix: Path, work: Path
) -> list[StoredWheel]:
    """Pack each named member from the environment at `prefix` into the store (an entry with
    the same bytes is there already after the first time)."""
    store, kept = WheelStore(), []
    work.mkdir(parents=True, exist_ok=True)
    for name in names:
        member = closure[name]
        dist_info = dist_info_dir(site, name)
        if dist_info is None or member.record_sha256 is None:
            raise SetupError(
                STEP,
                f"cannot keep {name} in the wheel store: it is not installed in {prefix} with a "
                "RECORD; nothing more was stored",
                "keep it from an environment that holds the bound closure (`automl-setup "
                "recreate` makes one)",
            )
        wheel = pack_installed(dist_info, prefix, work)
        packed = PackedMember(
            record_sha256=member.record_sha256,
            direct_url=member.direct_url,
            environment=str(prefix),
        )
        entry = WheelEntry(
            sha256=sha256_file(wheel),
            wheel_filename=wheel.name,
            distribution=name,
            version=member.version,
            origin="closure-member",
            source=None,
            backend=None,
            time=utc_now(),
            member=packed,
        )
        kept.append(store.put(wheel, entry))
        wheel.unlink()
    return kept


def set_direct_url(dist_info: Path, direct: dict[str, object] | None) -> None:
    """Write the distribution's PEP 610 `direct_url.json` (None: remove it, as for a
    distribution from an index) and the matching RECORD line."""
    record_path = dist_info / "RECORD"
    rel = f"{dist_info.name}/direct_url.json"
    rows = [r for r in parse_record_csv(record_path.read_text("utf-8")) if r[0] != rel]
    if direct is None:
        (dist_info / "direct_url.json").unlink(missing_ok=True)
    else:
        data = json.dumps(direct, sort_keys=True).encode()
        atomic_write_bytes(dist_info / "direct_url.json", data)
        rows.append((rel, record_hash(data), str(len(data))))
    text = "".join(f"{p},{h},{s}\n" for p, h, s in rows)
    atomic_write_bytes(record_path, text.encode("utf-8"))


def restore_origins(site: list[Path], origins: Iterable[tuple[str, DirectUrl | None]]) -> None:
    """Members installed from their store wheels get the origin they were packed with."""
    for name, direct in origins:
        dist_info = dist_info_dir(site, name)
        if dist_info is None:
            raise SetupError(
                "install",
                f"uv reported success but {name} is not installed from its store wheel",
                "run the command again; if it repeats, report it with the uv log",
            )
        set_direct_url(dist_info, None if direct is None else direct.pep610())


def pack_installed(dist_info: Path, prefix: Path, out_dir: Path) -> Path:
    """Pack the distribution of `dist_info` (in the environment at `prefix`) into a wheel in
    `out_dir`; refused when a file is missing or differs from its RECORD hash."""
    site = dist_info.parent
    record = _read(dist_info / "RECORD", dist_info)
    meta = HeaderParser().parsestr(_read(dist_info / "METADATA", dist_info), headersonly=True)
    if not str(meta.get("Version", "")):
        raise _refused(dist_info, "its METADATA names no version")
    stem = dist_info.name[: -len(".dist-info")]
    data_dir = f"{stem}.data"
    entry_scripts = _entry_point_scripts(dist_info)
    files: dict[str, tuple[bytes, int]] = {}
    for path, expected, _size in parse_record_csv(record):
        if not expected or path.endswith(".pyc"):
            continue  # bytecode and RECORD itself: no hash, written by the installer
        if path.startswith(f"{dist_info.name}/") and path.rsplit("/", 1)[-1] in INSTALL_FILES:
            continue
        target = Path(os.path.normpath(site / path))
        arcname = path
        if path.startswith("../"):
            rel = Path(os.path.relpath(target, prefix))
            if rel.parts[0] == "..":
                raise _refused(dist_info, f"{path} lies outside the environment {prefix}")
            if rel.parts[0] in _SCRIPTS and len(rel.parts) == 2:
                if rel.name in entry_scripts:
                    continue
                arcname = f"{data_dir}/scripts/{rel.name}"
            else:
                arcname = f"{data_dir}/data/{rel.as_posix()}"
        try:
            data = target.read_bytes()
            mode = target.stat().st_mode
        except OSError as exc:
            raise _refused(dist_info, f"cannot read {target}: {exc.strerror or exc}") from None
        if record_hash(data) != expected:
            raise _refused(dist_info, f"{path} was changed since it was installed")
        if arcname.startswith(f"{data_dir}/scripts/"):
            data = _portable_shebang(data)
        files[arcname] = (data, mode)
    rows = [f"{name},{record_hash(data)},{len(data)}\n" for name, (data, _m) in files.items()]
    record_name = f"{dist_info.name}/RECORD"
    files[record_name] = ("".join([*sorted(rows), f"{record_name},,\n"]).encode(), 0o644)
    wheel = out_dir / f"{stem}-{_tag(_read(dist_info / 'WHEEL', dist_info))}.whl"
    _write_zip(wheel, files)
    return wheel


def _read(path: Path, dist_info: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _refused(dist_info, f"cannot read {path.name}: {exc}") from None


def _entry_point_scripts(dist_info: Path) -> set[str]:
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        parser.read_string((dist_info / "entry_points.txt").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, configparser.Error):
        return set()
    names = set()
    for section in ("console_scripts", "gui_scripts"):
        if parser.has_section(section):
            names.update(parser.options(section))
    return names | {f"{n}.exe" for n in names}


def _portable_shebang(data: bytes) -> bytes:
    """A script the installer pointed at this environment's interpreter, pointed back at
    `python` (the installer of the next environment rewrites it again)."""
    first, sep, rest = data.partition(b"\n")
    if first.startswith(b"#!") and b"python" in first:
        return b"#!python" + sep + rest
    return data


def _tag(wheel_text: str) -> str:
    """The compressed tag set of a WHEEL file's `Tag:` lines (`py3-none-any`)."""
    tags = HeaderParser().parsestr(wheel_text, headersonly=True).get_all("Tag") or []
    parts = [tag.strip().split("-") for tag in tags if tag.count("-") == 2]
    if not parts:
        return "py3-none-any"
    return "-".join(".".join(sorted({p[i] for p in parts})) for i in range(3))


def _write_zip(wheel: Path, files: dict[str, tuple[bytes, int]]) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(files):
            data, mode = files[name]
            info = zipfile.ZipInfo(name, _EPOCH)
            info.external_attr = ((0o755 if mode & 0o111 else 0o644) | 0o100000) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    atomic_write_bytes(wheel, buffer.getvalue())


def _refused(dist_info: Path, cause: str) -> SetupError:
    return SetupError(
        STEP,
        f"cannot keep {dist_info.name} in the wheel store: {cause}",
        "reinstall that distribution (its files no longer match its RECORD), then run the "
        "command again",
    )
