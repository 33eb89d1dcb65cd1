"""Git side of a source install: branch -> commit, exact-commit fetch, subtree id.

Every user value arrives as a checked value type (`mcp_server.values`) and reaches git only as
one argv element after `--end-of-options` (or as a config value in a repository we created).
Git runs through `children.git.run_git`: no shell, no terminal, no prompt, bounded in time and
in stalls by the bound the caller passes (`Watch`).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from mcp_server.children.bound import Watch
from mcp_server.children.git import LOCAL_TIMEOUT_S, NETWORK_TIMEOUT_S, TransportError, run_git
from mcp_server.errors import SetupError, shown
from mcp_server.fsutil import real_path
from mcp_server.scratch import scratch_dir
from mcp_server.source.profile import confusable_note, tomllib
from mcp_server.values import (
    SUBDIRECTORY_REMEDY,
    BranchName,
    CommitId,
    RepositoryUrl,
    Subdirectory,
)

# The steps of resolve's and branches' progress (what git waits on, while it waits).
RESOLVE_STEPS = ("resolve",)
BRANCHES_STEPS = ("branches",)
REMOTE = "automl-setup-source"


# --------------------------------------------------------------------------------------------
# Resolve


@dataclass(frozen=True)
class Resolution:
    repository: str  # credentials stripped
    branch: str
    ref: str
    commit: str


def git_url(url: str) -> tuple[str, str | None]:
    """The URL git is given, and the HTTP header that carries the URL's credential, if any.

    User info never reaches git inside the URL: git starts its https helper with the URL on
    the command line (`git remote-https NAME URL`), where every user's `ps` can read it. An
    https credential travels instead as an Authorization header set through the config
    environment; an ssh URL keeps its user (no secret) and loses a password (ssh never takes
    one from a URL)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    if parts.scheme == "ssh":
        return urlunsplit(parts._replace(netloc=f"{user}@{hostport}")), None
    bare = urlunsplit(parts._replace(netloc=hostport))
    basic = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()
    return bare, f"Authorization: Basic {basic}"


def remote_config(name: str, repository: RepositoryUrl) -> dict[str, str]:
    """Config of a remote defined only for one call, for GIT_CONFIG_KEY_n/VALUE_n."""
    url, header = git_url(repository.with_credentials)
    config = {f"remote.{name}.url": url}
    if header is not None:
        # Scoped to this URL: a redirect to another host does not receive it.
        config[f"http.{url}.extraHeader"] = header
    return config


def resolve_branch(
    repository: RepositoryUrl, branch: BranchName, watch: Watch, expect: CommitId | None = None
) -> Resolution:
    """Exactly refs/heads/<branch> on the remote; a missing branch is an error, never a tag.
    With `expect` (the commit the user confirmed), a branch that moved since is refused."""
    ref = f"refs/heads/{branch}"
    # A named remote defined only for this call, run where no repository can be discovered.
    with scratch_dir("automl-setup-resolve-") as empty:
        out = run_git(
            ["ls-remote", "--end-of-options", REMOTE, ref, f"refs/tags/{branch}"],
            cwd=Path(empty),
            step="resolve",
            timeout=NETWORK_TIMEOUT_S,
            watch=watch,
            config=remote_config(REMOTE, repository),
        )
    refs = dict(parse_ls_remote(out))
    if ref not in refs:
        tag_note = (
            f" (a tag named {shown(branch, 100)} exists, but tags are never installed)"
            if f"refs/tags/{branch}" in refs
            else ""
        )
        raise SetupError(
            "resolve",
            f"branch {shown(branch, 100)} does not exist on {repository}{tag_note}",
            "list branches with `git ls-remote --heads <repository>`, or pin one with --commit",
        )
    commit = CommitId(refs[ref])
    if expect is not None and commit != expect:
        raise SetupError(
            "resolve",
            f"{ref} now points at {commit}, not at {expect}, the commit that was confirmed; "
            "nothing was installed",
            f"show the user the new commit and, once they confirm it, install with --branch "
            f"{shown(branch, 100)} --expect-commit {commit}",
        )
    return Resolution(str(repository), branch, ref, commit)


def parse_ls_remote(out: str) -> list[tuple[str, str]]:
    pairs = []
    for line in out.splitlines():
        sha, _, name = line.partition("\t")
        if sha and name:
            pairs.append((name.strip(), sha.strip()))
    return pairs


# --------------------------------------------------------------------------------------------
# Fetch


@dataclass(frozen=True)
class FetchedSource:
    checkout: Path
    source_dir: Path  # the subdirectory inside checkout
    commit: str
    subtree_id: str
    commit_time: int  # seconds since the epoch (committer time)


def fetch_commit(
    repository: RepositoryUrl,
    commit: CommitId,
    subdirectory: Subdirectory,
    dest: Path,
    watch: Watch,
) -> FetchedSource:
    """Fetch exactly `commit` (shallow, blobless where the server allows) and check out only
    what the subdirectory needs into `dest`, which must not exist yet."""
    step = "fetch"
    # The remote only ever reaches git through the environment, not the scratch repository's
    # config file; its credential, as a header (see git_url).
    remote = {
        **remote_config("origin", repository),
        "remote.origin.promisor": "true",
        "remote.origin.partialclonefilter": "blob:none",
    }

    # Every git in the partial clone may fetch (blobs, on checkout): each under the stall bound.
    def git_here(args: list[str], timeout: float = LOCAL_TIMEOUT_S) -> str:
        return run_git(args, cwd=dest, step=step, timeout=timeout, watch=watch, config=remote)

    init = ["init", "-q", "--template=", str(dest)]
    run_git(init, step=step, timeout=LOCAL_TIMEOUT_S, watch=None)
    try:
        git_here(
            [
                *("fetch", "-q", "--no-tags", "--depth=1", "--filter=blob:none"),
                *("--end-of-options", "origin", commit),
            ],
            NETWORK_TIMEOUT_S,
        )
    except TransportError:
        raise  # the transport's own cause and remedy: the commit was never asked for
    except SetupError as exc:
        raise SetupError(
            step,
            f"commit {commit} could not be fetched from {repository}: "
            + exc.cause.removeprefix("git failed: "),
            "check that the commit exists on the repository (it may have been force-pushed "
            "away) and that you can reach it",
        ) from None
    kind = git_here(["cat-file", "-t", commit])
    if kind != "commit":
        raise SetupError(step, f"{commit} is a {kind}, not a commit", "pass a commit id")
    subtree_id = _subtree_id(git_here, commit, subdirectory)
    if subdirectory != ".":
        git_here(["sparse-checkout", "set", "--cone", "--", subdirectory])
    git_here(["checkout", "-q", "--detach", commit], NETWORK_TIMEOUT_S)  # fetches the blobs
    source_dir = _confined(dest, subdirectory)
    commit_time = int(git_here(["show", "-s", "--format=%ct", commit]))
    return FetchedSource(dest, source_dir, commit, subtree_id, commit_time)


def _subtree_id(git_here: Callable[[list[str]], str], commit: str, subdirectory: str) -> str:
    """Git tree id of the subdirectory; refuses a missing path, a file, or a symlink anywhere."""
    step = "fetch"
    if subdirectory == ".":
        return git_here(["rev-parse", "--verify", "--end-of-options", f"{commit}^{{tree}}"])
    parent = f"{commit}^{{tree}}"
    parts = subdirectory.split("/")
    tree_id = ""
    for depth, name in enumerate(parts):
        listing = git_here(["ls-tree", "--full-tree", "--end-of-options", parent, "--", name])
        entry = ls_tree_entry(listing, name)
        where = "/".join(parts[: depth + 1])
        if entry is None:
            raise SetupError(
                step,
                f"subdirectory {shown(subdirectory, 100)} does not exist at commit {commit[:12]}"
                + _layout_note(git_here, commit, subdirectory),
                "install a branch whose head holds it (`automl-setup branches "
                "--with-subdirectory` lists them), or correct --subdirectory",
            )
        mode, kind, object_id = entry
        if mode == "120000":
            raise SetupError(
                step,
                f"{where!r} is a symbolic link; the subdirectory may not leave the repository",
                "point --subdirectory at a real directory",
            )
        if kind != "tree":
            raise SetupError(
                step,
                f"{where!r} is not a directory at commit {commit[:12]}",
                "check --subdirectory against the repository layout at that commit",
            )
        parent = tree_id = object_id
    return tree_id


def _layout_note(git_here: Callable[[list[str]], str], commit: str, subdirectory: str) -> str:
    """What the commit holds where it matters: the distribution names declared by the root's
    pyproject.toml and by those of the subdirectory's siblings (only these blobs are fetched)."""
    parent = subdirectory.rpartition("/")[0]
    listing = git_here(
        ["ls-tree", "--full-tree", "-d", "--name-only", "--end-of-options", commit, "--"]
        + ([f"{parent}/"] if parent else [])
    )
    candidates = ["pyproject.toml"] + [f"{d}/pyproject.toml" for d in listing.splitlines()[:20]]
    present = git_here(
        ["ls-tree", "--full-tree", "--name-only", "--end-of-options", commit, "--", *candidates]
    ).splitlines()
    declared = []
    for path in (c for c in candidates if c in present):
        try:
            name = tomllib.loads(git_here(["cat-file", "blob", f"{commit}:{path}"]))["project"][
                "name"
            ]
        except (SetupError, tomllib.TOMLDecodeError, KeyError, TypeError):
            continue  # not a readable declaration: nothing to report about it
        if isinstance(name, str):
            where = "the root pyproject.toml" if path == "pyproject.toml" else path
            declared.append((where, name))
    if not declared:
        return ""
    text = "; at that commit " + " and ".join(f"{w} declares {shown(n, 100)}" for w, n in declared)
    notes = [confusable_note(n) for _w, n in declared if confusable_note(n)]
    if notes:
        text += f". {notes[0]}: the core lives on branches whose head holds {subdirectory}"
    return text


def ls_tree_entry(listing: str, name: str) -> tuple[str, str, str] | None:
    for line in listing.splitlines():
        meta, _, path = line.partition("\t")
        if path == name:
            mode, kind, object_id = meta.split()
            return mode, kind, object_id
    return None


def _confined(root: Path, subdirectory: str) -> Path:
    """The checked-out subdirectory, proven to resolve inside the checkout (by `real_path`:
    `Path.resolve()` judges a symlink loop differently on each Python version)."""
    try:
        real_root, target = real_path(root), real_path(root / subdirectory)
    except OSError as exc:  # ELOOP: a symlink loop
        cause = f"subdirectory {shown(subdirectory, 100)} cannot be followed: {exc.strerror}"
        raise SetupError("fetch", cause, SUBDIRECTORY_REMEDY) from None
    if target != real_root and real_root not in target.parents:
        raise SetupError(
            "fetch",
            f"subdirectory {shown(subdirectory, 100)} escapes the repository",
            SUBDIRECTORY_REMEDY,
        )
    if not target.is_dir():
        raise SetupError(
            "fetch",
            f"subdirectory {shown(subdirectory, 100)} was not checked out",
            "check --subdirectory against the repository layout at that commit",
        )
    return target
