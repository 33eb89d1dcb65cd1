"""What is (not) installed in an environment, told plainly, with the commands that fix it."""

from __future__ import annotations

import shlex

from packaging.utils import canonicalize_name
from pydantic import BaseModel, ConfigDict

from mcp_server.environment.records import RecordStore
from mcp_server.environment.target import locate
from mcp_server.environment.verify import VerifyStatus, verify_environment
from mcp_server.source.profile import (
    CONFUSABLE_DISTRIBUTIONS,
    CORE_IMPORT_NAME,
    DEFAULT_DISTRIBUTION,
    EngineProfile,
)
from mcp_server.values import TargetPath


class InstalledPackage(BaseModel):
    model_config = ConfigDict(frozen=True)
    distribution: str
    import_name: str | None = None  # known for the default core and the confusables only
    version: str | None
    importable: bool


class Diagnosis(BaseModel):
    model_config = ConfigDict(frozen=True)
    environment: str
    interpreter: str
    engine: InstalledPackage
    record_status: VerifyStatus
    confusables: list[InstalledPackage]
    findings: list[str]
    install_commands: dict[str, str]

    @property
    def healthy(self) -> bool:
        return self.record_status == "verified"


def install_command(profile: EngineProfile, environment: str, *, ref: list[str]) -> str:
    argv = ["automl-setup", "install", *ref, "--python", environment]
    return shlex.join(argv + profile.flags())  # the profile's URL holds no credentials


def diagnose(python: TargetPath | None, profile: EngineProfile) -> Diagnosis:
    env = locate(python)
    record = RecordStore(env.state_dir).read_record()
    if record is not None:  # the environment says which engine it holds: use that one
        profile = EngineProfile(
            repository=record.source.repository,
            subdirectory=record.source.subdirectory,
            distribution=record.build.distribution,
            requirement=profile.requirement,
        )
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
    findings = _findings(profile, engine, report.status, report.notes, confusables)
    findings += [d.describe() for d in report.differences]
    if not probe.is_venv and not (env.prefix / "conda-meta").is_dir():
        findings.append(
            f"note: {env.prefix} is a base interpreter, not a virtual environment: an install "
            "there changes it for everyone who uses that Python"
        )
    where = str(env.prefix)
    commands = {
        "main": install_command(profile, where, ref=["--branch", "main"]),
        "development branch": install_command(profile, where, ref=["--branch", "<dev-branch>"]),
    }
    if record is not None:
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
    )


def _findings(
    profile: EngineProfile,
    engine: InstalledPackage,
    status: VerifyStatus,
    notes: list[str],
    confusables: list[InstalledPackage],
) -> list[str]:
    out: list[str] = []
    core = engine.distribution + (f" (import {engine.import_name})" if engine.import_name else "")
    if engine.version is None:
        out.append(f"the AutoML core ({profile.distribution}) is not installed in this environment")
    for other in confusables:
        if other.version is not None or other.importable:
            out.append(
                f"{other.distribution} {other.version or ''} is installed (import "
                f"{other.import_name}): that is the separately published application, not the "
                f"core {core}; it does not provide it"
            )
    if not any(o.version for o in confusables):
        out.append(
            f"note: nvidia-tao-automl (import tao_automl) is a different distribution from the "
            f"core {core}; installing it does not help"
        )
    status_text = {
        "verified": "the installed core matches its record (verified)",
        "mismatch": "the installed core was modified after install or does not match its record",
        "no-record": "the core is installed without an automl-setup record (e.g. by pip); "
        "its source commit is unproven: reinstall with automl-setup",
        "no-engine": "",
        "interrupted": "an install into this environment was interrupted",
        "in-progress": "an install into this environment is in progress",
    }[status]
    if status_text:
        out.append(status_text)
    return out + notes
