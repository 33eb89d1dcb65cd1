"""The `prompts` extra's pin: gepa must be exactly the version automl-setup pins (its own
`prompts` extra), the engine declares (its `prompts` extra) and the environment holds.

An engine with a GEPA workload depends on GEPA's exact behaviour (its reflection prompt, its
saved state), so a gepa the user installed by hand, or one that a loose requirement let stay,
is refused rather than recorded: the three versions are shown side by side.
"""

from __future__ import annotations

from pathlib import Path

from packaging.utils import canonicalize_name

from mcp_server.environment.identity import active_requirements
from mcp_server.environment.records import InstallRecord
from mcp_server.environment.target import TargetEnv
from mcp_server.errors import SetupError

GEPA = "gepa"
GEPA_PIN = "0.1.2"  # the same pin as pyproject.toml's `prompts` extra (tests check both)
PROMPTS_EXTRA = "prompts"


def check_gepa(
    requires: tuple[str, ...] | list[str],
    extras: list[str],
    installed: str | None,
    environment: Path,
) -> None:
    """Refuse unless the engine declares `gepa==GEPA_PIN` and the environment holds exactly
    it. Applies when the `prompts` extra is installed or the installed extras bring gepa."""
    declared = ", ".join(
        f"{GEPA}{req.specifier}"
        for req in active_requirements(requires, extras)
        if canonicalize_name(req.name) == GEPA
    )
    if PROMPTS_EXTRA not in extras and not declared:
        return
    pinned = f"{GEPA}=={GEPA_PIN}"
    if declared == pinned and installed == GEPA_PIN:
        return
    if declared != pinned:
        remedy = (
            f"install an engine whose `{PROMPTS_EXTRA}` extra declares {pinned} exactly, or "
            f"install without --extra {PROMPTS_EXTRA}"
        )
    else:
        remedy = (
            f"put the pinned gepa back (uv pip install --python {environment} {pinned}) and "
            f"install again, or install into a fresh environment (--python NEW --create-env)"
        )
    raise SetupError(
        "check gepa",
        f"gepa in {environment} is not the version the `{PROMPTS_EXTRA}` extra pins",
        remedy,
        details=[
            f"automl-setup pins:    {pinned}",
            f"the engine declares:  {declared or 'no gepa requirement'}",
            f"the environment has:  {f'{GEPA} {installed}' if installed else 'no gepa'}",
        ],
    )


def check_installed_gepa(env: TargetEnv, record: InstallRecord) -> None:
    """The same check for an engine already installed (an install that would change nothing):
    a gepa changed by hand since is refused, not reported as installed and verified."""
    extras = record.install.extras
    if PROMPTS_EXTRA not in extras and GEPA not in record.environment.dependencies:
        return  # no probe: the engine neither brought nor declared gepa
    probe = env.probe([record.build.distribution])
    installed = probe.dists.get(record.build.distribution)
    requires = installed.requires if installed is not None else ()
    check_gepa(requires, extras, probe.versions.get(GEPA), env.prefix)
