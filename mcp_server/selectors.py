"""Checked values that select experiments by the build they are bound to (`list --bound-commit`,
`--identity-digest`, `--closure-member`) and the tracking server `track` writes to. Each is a
`str` subclass whose constructor checks it (values.py's rule), so no untrusted text reaches a
filter, a URL or a log unchecked."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from mcp_server.errors import InvalidInput, shown
from mcp_server.values import _Value

MIN_PREFIX = 4  # shorter prefixes match nearly everything
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,126}[A-Za-z0-9])?")
_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+!_-]{0,63}")


class HexPrefix(_Value):
    """The start of a commit id or a digest: 4 to 64 hex digits, lowered."""

    @classmethod
    def _check(cls, raw: str) -> str:
        value = raw.strip().lower()
        if not re.fullmatch(rf"[0-9a-f]{{{MIN_PREFIX},64}}", value):
            cause = f"{shown(raw, 70)} is not the start of a commit or digest"
            remedy = f"pass {MIN_PREFIX} to 64 hex digits, as `status` or `history` print them"
            raise InvalidInput("validate prefix", cause, remedy)
        return value


class ClosureMemberSpec(_Value):
    """A distribution of a bound closure, `NAME` or `NAME==VERSION` (the name compared in its
    canonical form, as the closure records it)."""

    @classmethod
    def _check(cls, raw: str) -> str:
        name, sep, version = raw.strip().partition("==")
        if not _NAME.fullmatch(name) or (sep and not _VERSION.fullmatch(version)):
            cause = f"{shown(raw, 70)} is not a distribution NAME or NAME==VERSION"
            remedy = "pass a distribution name, optionally with ==VERSION (numpy==2.1.0)"
            raise InvalidInput("validate closure member", cause, remedy)
        canonical = re.sub(r"[-_.]+", "-", name).lower()
        return f"{canonical}=={version}" if sep else canonical

    @property
    def name(self) -> str:
        return self.partition("==")[0]

    @property
    def version(self) -> str | None:
        return self.partition("==")[2] or None


class TrackingUri(_Value):
    """An MLflow tracking server: http(s)://host[:port][/path]. Credentials never ride in it:
    MLflow's own variables carry them (MLFLOW_TRACKING_TOKEN, or _USERNAME and _PASSWORD), so
    the URI can be printed and recorded as it is."""

    @classmethod
    def _check(cls, raw: str) -> str:
        value = raw.strip().rstrip("/")
        try:
            parts = urlsplit(value)
            port = parts.port
        except ValueError:
            parts, port = None, None
        remedy = "pass http(s)://HOST[:PORT][/PATH] of the MLflow tracking server"
        if (
            parts is None
            or parts.scheme not in ("http", "https")
            or not parts.hostname
            or parts.query
            or parts.fragment
            or len(value) > 500
            or any(ord(c) < 0x20 or c == "\x7f" for c in value)
        ):
            raise InvalidInput(
                "validate tracking uri", f"{shown(raw, 70)} is not an http(s) URL", remedy
            )
        if parts.username is not None or parts.password is not None:
            raise InvalidInput(
                "validate tracking uri",
                "the tracking URI carries credentials (user:password@), which would then be "
                "shown and recorded wherever the URI is",
                "pass the URI without them, and the credentials in MLflow's own variables: "
                "MLFLOW_TRACKING_TOKEN, or MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD",
            )
        del port  # checked above: a bad port is a ValueError
        return value
