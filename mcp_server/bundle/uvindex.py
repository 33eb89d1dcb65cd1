"""The package index the committed uvx entry installs automl-setup from (`init --index URL`,
or the project file's `index`), written where uv reads it: uvx's own `--index NAME=URL`.

In the arguments, not in the entry's `env`: the clients hand `env` to the server too, and the
server runs uv for every engine install, which would then resolve the engine's dependencies
through the team's index as well. A named index (`automl-setup`) is uv's way to take its login
from the user's own environment (`UV_INDEX_AUTOML_SETUP_USERNAME`, `_PASSWORD`), the keyring
or `.netrc`; a URL carrying a login is refused, since the entry is committed."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from mcp_server.errors import InvalidInput
from mcp_server.source.config import find_project_file
from mcp_server.values import has_control

INDEX_NAME = "automl-setup"
_ENV_NAME = INDEX_NAME.upper().replace("-", "_")  # uv's spelling of the name in a variable
USERNAME_VAR, PASSWORD_VAR = f"UV_INDEX_{_ENV_NAME}_USERNAME", f"UV_INDEX_{_ENV_NAME}_PASSWORD"
# What a client that passes only the variables it is told (Codex's `env_vars`) must pass to
# uvx for the login: the two credentials, and the keyring provider when the login is there.
PASSED_VARS = (USERNAME_VAR, PASSWORD_VAR, "UV_KEYRING_PROVIDER")
MAX_INDEX_URL = 2000
STEP = "init"


def check_index(raw: str, origin: str) -> str:
    """The index URL `origin` (`--index`, or the project file naming it) gave, checked: an
    http(s) URL with a host, printable, without a login; refused otherwise."""
    remedy = f"give the index's simple URL, for example https://pypi.example.com/simple/ ({origin})"
    if not raw or len(raw) > MAX_INDEX_URL or has_control(raw) or any(c.isspace() for c in raw):
        raise InvalidInput(STEP, f"{origin}: the index URL is empty, too long or not text", remedy)
    parts = urlsplit(raw)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        shown = raw if len(raw) <= 80 else raw[:80] + "..."
        raise InvalidInput(STEP, f"{origin}: {shown!r} is not an http(s) URL with a host", remedy)
    if parts.username is not None or parts.password is not None:
        raise InvalidInput(
            STEP,
            f"{origin}: the index URL carries a login (user:password@); the uvx entry is "
            "committed and shared, so it never holds one",
            f"give the URL without it; uv takes the login from each user's own environment "
            f"({USERNAME_VAR} and {PASSWORD_VAR}), the keyring (UV_KEYRING_PROVIDER=subprocess) "
            "or ~/.netrc",
        )
    return raw


def index_args(url: str) -> list[str]:
    """uvx's arguments that make the index the first one it asks (uv's first-index rule: the
    pinned automl-setup comes from it alone, whatever another index holds by that name)."""
    return ["--index", f"{INDEX_NAME}={url}"]


def effective_index(project: Path, given: str | None, launcher: str) -> str | None:
    """The index of the uvx entry: `--index` (already checked), else the project file's
    `index`; none for the path launcher, which installs nothing (`--index` with it refused)."""
    if launcher != "uvx":
        if given is not None:
            raise InvalidInput(
                STEP,
                "--index names where uvx installs automl-setup from, and the server's command "
                "is not uvx",
                "add --launcher uvx (the pinned uvx entry a team commits), or leave --index out",
            )
        return None
    if given is not None:
        return given
    found = find_project_file(project)
    if found is None or found.index is None:
        return None
    return check_index(found.index, f"{found.label} index")
