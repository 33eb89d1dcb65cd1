"""The branches of the engine repository (`refs/heads/*` and their commits), so that an agent
offers the user real choices; optionally only those whose head holds the profile's
subdirectory, found from trees alone (a shallow, blobless fetch of the heads: no file content).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.children.bound import Watch
from mcp_server.children.git import LOCAL_TIMEOUT_S, NETWORK_TIMEOUT_S, run_git
from mcp_server.scratch import scratch_dir
from mcp_server.source.gitsource import REMOTE, ls_tree_entry, parse_ls_remote, remote_config
from mcp_server.source.profile import EngineProfile, ProfileSource

HEADS = "refs/heads/"


class BranchHead(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    branch: str = Field(description="Branch name, without refs/heads/.")
    ref: str = Field(description="refs/heads/<branch>.")
    commit: str = Field(description="Full commit id the branch points at now.")


class BranchListing(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    repository: str = Field(description="Repository URL, credentials stripped.")
    with_subdirectory: str | None = Field(
        description="When asked: only branches whose head holds this subdirectory are listed."
    )
    branches: list[BranchHead] = Field(
        description="The branches (refs/heads/*), each with the commit it points at."
    )
    without_subdirectory: int = Field(
        description="How many branches were left out because their head lacks the subdirectory."
    )
    profile_source: ProfileSource = Field(
        description="Which engine repository was asked, and where that choice came from."
    )


def list_branches(profile: EngineProfile, with_subdirectory: bool, watch: Watch) -> BranchListing:
    heads = _heads(profile, watch)
    kept = heads
    if with_subdirectory and heads:
        kept = _holding_subdirectory(profile, heads, watch)
    return BranchListing(
        repository=str(profile.repository),
        with_subdirectory=profile.subdirectory if with_subdirectory else None,
        branches=kept,
        without_subdirectory=len(heads) - len(kept),
        profile_source=profile.source(),
    )


def _heads(profile: EngineProfile, watch: Watch) -> list[BranchHead]:
    with scratch_dir("automl-setup-branches-") as empty:
        out = run_git(
            ["ls-remote", "--heads", "--end-of-options", REMOTE],
            cwd=Path(empty),
            step="branches",
            timeout=NETWORK_TIMEOUT_S,
            watch=watch,
            config=remote_config(REMOTE, profile.repository),
        )
    return sorted(
        (
            BranchHead(branch=ref.removeprefix(HEADS), ref=ref, commit=commit)
            for ref, commit in parse_ls_remote(out)
            if ref.startswith(HEADS)
        ),
        key=lambda head: head.branch,
    )


def _holding_subdirectory(
    profile: EngineProfile, heads: list[BranchHead], watch: Watch
) -> list[BranchHead]:
    step = "branches"
    commits = sorted({head.commit for head in heads})
    with scratch_dir("automl-setup-branches-") as work:
        repo = Path(work) / "trees"
        init = ["init", "-q", "--bare", "--template=", str(repo)]
        run_git(init, step=step, timeout=60, watch=None)
        config = {
            **remote_config("origin", profile.repository),
            "remote.origin.promisor": "true",
            "remote.origin.partialclonefilter": "blob:none",
        }
        run_git(
            [
                *("fetch", "-q", "--no-tags", "--depth=1", "--filter=blob:none"),
                *("--end-of-options", "origin", *commits),
            ],
            cwd=repo,
            step=step,
            timeout=NETWORK_TIMEOUT_S,
            watch=watch,
            config=config,
        )
        holding = {c for c in commits if _has_tree(repo, c, profile.subdirectory)}
    return [head for head in heads if head.commit in holding]


def _has_tree(repo: Path, commit: str, subdirectory: str) -> bool:
    """Whether the commit's tree has a directory at `subdirectory`, read from trees alone (git
    does not walk through a symlink on the way, so one there does not count)."""
    if subdirectory == ".":
        return True
    listing = run_git(
        ["ls-tree", "--full-tree", "--end-of-options", commit, "--", subdirectory],
        cwd=repo,
        step="branches",
        timeout=LOCAL_TIMEOUT_S,
        watch=None,  # trees only: the fetch brought them all
    )
    entry = ls_tree_entry(listing, subdirectory)
    return entry is not None and entry[:2] == ("040000", "tree")
