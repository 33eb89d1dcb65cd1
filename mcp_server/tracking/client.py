"""MLflow's own client, made safe to run inside automl-setup: the `tracking` extra imported only
here (its absence a refusal saying how to add it), nothing printed to stdout (the MCP server
speaks JSON-RPC there), bounded retries (MLflow's default backoff waits minutes on a server
that is down), and every failure a refusal naming the step, MLflow's or the transport's own
words and the remedy. Credentials come from MLflow's variables, which MLflow reads itself;
automl-setup never reads, passes or prints them."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from mcp_server.errors import SetupError
from mcp_server.selectors import TrackingUri

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

EXTRA = "tracking"
INSTALL = f"pip install 'automl-setup[{EXTRA}]' (or uv tool install 'automl-setup[{EXTRA}]')"

# MLflow's knobs, set only where the user has not (`setdefault`): a failure is told in seconds.
DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
}
# Every failure's remedy ends so: syncs are idempotent (sync.py).
TRACK_AGAIN = "track again: the next sync completes this one, never duplicating a run"
CREDENTIALS = ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")
UNREACHABLE = re.compile(
    r"Connection refused|Failed to establish a new connection|Max retries exceeded|"
    r"Name or service not known|Temporary failure in name resolution|timed out|"
    r"Connection reset|Connection aborted|RemoteDisconnected"
)


def resolve_uri(given: TrackingUri | None) -> TrackingUri:
    """The tracking URI asked for, else MLFLOW_TRACKING_URI's (checked the same way)."""
    if given is not None:
        return given
    found = os.environ.get("MLFLOW_TRACKING_URI")
    if not found:
        raise SetupError(
            "track",
            "no tracking server named: no --tracking-uri, and MLFLOW_TRACKING_URI is not set",
            "pass --tracking-uri http(s)://HOST[:PORT] (MCP: tracking_uri), or set "
            "MLFLOW_TRACKING_URI",
        )
    return TrackingUri(found)


def tracking_client(uri: TrackingUri) -> MlflowClient:
    for name, value in DEFAULTS.items():
        os.environ.setdefault(name, value)
    try:
        from mlflow.tracking import MlflowClient
    except ImportError as exc:
        raise SetupError(
            "track",
            f"MLflow's client is not installed with this automl-setup ({exc.msg})",
            f"add the `{EXTRA}` extra: {INSTALL}",
        ) from None
    return MlflowClient(tracking_uri=str(uri))


@contextlib.contextmanager
def mlflow_calls(step: str, uri: TrackingUri) -> Iterator[None]:
    """Every MLflow error inside as a refusal of `step`, with its cause and remedy."""
    try:
        from mlflow.exceptions import MlflowException
    except ImportError:  # tracking_client said so already
        yield
        return
    try:
        yield
    except MlflowException as exc:
        status = exc.get_http_status_code()  # type: ignore[no-untyped-call]
        raise refusal(step, uri, status, exc.message) from None
    except OSError as exc:  # a connection the client did not wrap
        raise refusal(step, uri, None, str(exc)) from None


def refusal(step: str, uri: TrackingUri, status: int | None, said: str) -> SetupError:
    words = " ".join(said.split())[:400]
    again = f"then {TRACK_AGAIN}"
    if status == 401:
        given = [name for name in CREDENTIALS if os.environ.get(name)]
        cause = (
            f"the tracking server at {uri} refused the credentials given ({', '.join(given)})"
            if given
            else f"the tracking server at {uri} wants credentials, and none were given"
        )
        what = "check" if given else "set"
        return SetupError(
            step,
            f"{cause} (401: {words})",
            f"{what} MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or "
            "MLFLOW_TRACKING_TOKEN) in automl-setup's environment (for the MCP server: the `env` "
            f"of its entry in the client's configuration); {again}",
        )
    if status == 403:
        return SetupError(
            step,
            f"the tracking server at {uri} does not allow this user to do that (403: {words})",
            f"ask its admin for permission on the experiment (MLflow's basic-auth "
            f"permissions), or track as another user; {again}",
        )
    if UNREACHABLE.search(said):  # MLflow wraps a refused connection as its own error 500
        return SetupError(
            step,
            f"the tracking server at {uri} does not answer: {words}",
            f"start it or check the URI (--tracking-uri, MLFLOW_TRACKING_URI); {again}",
        )
    return SetupError(
        step,
        f"the tracking server at {uri} refused: {words}" + (f" (HTTP {status})" if status else ""),
        f"read MLflow's words above; {again}",
    )


def page_all(search: Any, **kwargs: Any) -> list[Any]:
    """Every result of a paged MLflow search."""
    found, token = [], None
    while True:
        page = search(page_token=token, **kwargs)
        found += list(page)
        token = page.token
        if not token:
            return found
