"""Credential redaction: URLs with user info, and anything that looks like a token in a URL."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

# scheme://userinfo@host  -> scheme://host ; userinfo may hold "user:token".
# Up to the last '@' before the path: a password may itself contain '@'.
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#\s]+)@")
# ?access_token=..., &token=... and the like inside URLs.
_QUERY_SECRET = re.compile(
    r"(?P<key>[?&](?:access_token|private_token|token|password|passwd|secret|key|sig)=)[^&#\s'\"]+",
    re.IGNORECASE,
)

# The header automl-setup hands a URL's credential to git as, should any output quote it.
_AUTH_HEADER = re.compile(r"(?P<key>authorization:\s*(?:basic|bearer)\s+)[^\s'\"]+", re.IGNORECASE)

REDACTED = "***"


def strip_credentials(url: str) -> str:
    """The URL as it may be recorded: no user info (except a bare ssh user), no secret query."""
    parts = urlsplit(url)
    if parts.scheme and parts.netloc and "@" in parts.netloc:
        userinfo, _, hostport = parts.netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        keep_user = parts.scheme == "ssh" and ":" not in userinfo
        netloc = f"{user}@{hostport}" if keep_user else hostport
        parts = parts._replace(netloc=netloc)
    url = urlunsplit(parts)
    return _QUERY_SECRET.sub(lambda m: m.group("key") + REDACTED, url)


def carries_secret(url: str) -> bool:
    """Whether a URL holds a secret: a password or token in its user info or its query."""
    return urlsplit(url).password is not None or _QUERY_SECRET.search(url) is not None


def redact_text(text: str) -> str:
    """Any text that may quote a URL (git and uv errors do) with its credentials masked."""

    def _mask(m: re.Match[str]) -> str:
        userinfo = m.group("userinfo")
        if m.group("scheme") == "ssh://" and ":" not in userinfo:
            return m.group(0)
        return f"{m.group('scheme')}{REDACTED}@"

    text = _AUTH_HEADER.sub(lambda m: m.group("key") + REDACTED, text)
    return _QUERY_SECRET.sub(lambda m: m.group("key") + REDACTED, _USERINFO.sub(_mask, text))
