"""What is (not) installed in an environment, told plainly, with the commands that fix it."""

from __future__ import annotations

import shlex

from packaging.utils import canonicalize_name
from pydantic import BaseModel, ConfigDict, Field

from mcp_server.environment.records import RecordStore
from mcp_server.environment.target import locate
from mcp_server.environment.verify import VerifyStatus, verify_environment
from mcp_server.source.profile import (
    CONFUSABLE_DISTRIBUTIONS,
    CORE_IMPORT_NAME,
    DEFAULT_DISTRIBUTION,
    EngineProfile,
    ProfileSource,
)
from mcp_server.values import TargetPath

# Nothing to install: the engine verifies, or an unfinished install awaits `repair`.
QUIET_STATUSES: frozenset[VerifyStatus] = frozenset({"verified", "interrupted", "in-progress"})


class InstalledPackage(BaseModel):
    model_config = ConfigDict(frozen=True)
    distribution: str = Field(description="Distribution name.")
    import_name: str | None = Field(
        None, description="The module it provides, known for the core and its look-alikes only."
    )
    version: str | None = Field(description="Installed version; null when unknown.")
    importable: bool = Field(description="Whether its module imports.")


class Diagnosis(BaseModel):
    model_config = ConfigDict(frozen=True)
    environment: str = Field(description="sys.prefix of the environment diagnosed.")
    interpreter: str = Field(description="Its interpreter.")
    engine: InstalledPackage = Field(description="The engine's distribution, if installed.")
    record_status: VerifyStatus = Field(description="The verify status of the engine.")
    confusables: list[InstalledPackage] = Field(description="Look-alike packages installed.")
    findings: list[str] = Field(description="One line per fact found.")
    install_commands: dict[str, str] = Field(
        description="Commands that install the core; none when it is verified, or while an "
        "install is unfinished (the finding names `repair`)."
    )
    profile_source: ProfileSource = Field(description="Which engine profile, and from where.")

    @property
    def healthy(self) -> bool:
        return self.record_status == "verified"


def install_command(profile: EngineProfile, environment: str, *, ref: list[str]) -> str:
    argv = ["automl-setup", "install", *ref, "--python", environment]
    return shlex.join(argv + profile.flags())  # the profile's URL holds no credentials


def diagnose(python: TargetPath | None, profile: EngineProfile) -> Diagnosis:
    env = locate(python)
    record = RecordStore(env.state_dir).read_record()
    if record is not None and record.source is not None:  # the environment says which engine
        profile = EngineProfile(
            repository=record.source.repository,
            subdirectory=record.source.subdirectory,
            distribution=record.build.distribution,
            requirement=profile.requirement,
        ).with_origin(f"the install record in {env.prefix}")
    is_core = profile.canonical_distribution == canonicalize_name(DEFAULT_DISTRIBUTION)
    confusable = list(CONFUSABLE_DISTRIBUTIONS)
    modules = [CORE_IMPORT_NAME, *CONFUSABLE_DISTRIBUTIONS.values()]
    probe = env.probe([profile.distribution, *confusable], modules)
    report = verify_environment(env, profile.distribution, probe=probe)
    engine_dist = probe.dists.get(profile.distribution)
    engine = InstalledPackage(
        distribution=profile.distribution,
        import_name=CORE_IMPORT_NAME if is_core else None,
        version=engine_dist.version if engine_dist else None,
        importable=probe.modules[CORE_IMPORT_NAME] if is_core else engine_dist is not None,
    )
    confusables = [
        InstalledPackage(
            distribution=name,
            import_name=module,
            version=d.version if (d := probe.dists.get(name)) else None,
            importable=probe.modules[module],
        )
        for name, module in CONFUSABLE_DISTRIBUTIONS.items()
    ]
    findings = _findings(engine, report.status, report.notes, confusables)
    findings += [d.describe() for d in report.differences]
    if not probe.is_venv and not (env.prefix / "conda-meta").is_dir():
        findings.append(
            f"note: {env.prefix} is a base interpreter, not a virtual environment: an install "
            "there changes it for everyone who uses that Python"
        )
    where = str(env.prefix)
    commands: dict[str, str] = {}
    if report.status not in QUIET_STATUSES:
        commands["main"] = install_command(profile, where, ref=["--branch", "main"])
        commands["development branch"] = install_command(
            profile, where, ref=["--branch", "<dev-branch>"]
        )
        if record is not None and record.source is not None:
            commands["recorded commit"] = install_command(
                profile, where, ref=["--commit", record.source.commit]
            )
    return Diagnosis(
        environment=where,
        interpreter=str(env.interpreter),
        engine=engine,
        record_status=report.status,
        confusables=confusables,
        findings=findings,
        install_commands=commands,
        profile_source=profile.source(),
    )


def _findings(
    engine: InstalledPackage,
    status: VerifyStatus,
    notes: list[str],
    confusables: list[InstalledPackage],
) -> list[str]:
    out: list[str] = []
    core = engine.distribution + (f" (import {engine.import_name})" if engine.import_name else "")
    for other in confusables:
        if other.version is not None or other.importable:
            out.append(
                f"{other.distribution} {other.version or '(no metadata)'} is installed (import "
                f"{other.import_name}): that is the separately published application, not the "
                f"core {core}; it does not provide it"
            )
    # The other statuses are told by verify's own note, once (one line per fact): the missing
    # engine, the installer of an unrecorded one, the unfinished install's engine and `repair`.
    status_text = {
        "verified": "the installed core matches its record (verified)",
        "mismatch": "the installed core was modified after install or does not match its record",
    }.get(status)
    return out + ([status_text] if status_text else []) + notes
