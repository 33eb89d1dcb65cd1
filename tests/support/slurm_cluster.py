"""The real one-node test cluster (tests/slurm/cluster.sh), as the tests use it."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SlurmCluster:
    """The running test cluster (tests/slurm/cluster.sh): its configuration and environment."""

    conf: Path

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}


def start_requeued_job(job_id: str, env: dict[str, str] | None = None) -> None:
    """Start a requeued job, already PENDING, now rather than at its begin time (about two
    minutes), but never within the second its requeue ended the last allocation: slurmd
    compares credential times in whole seconds and kills a relaunch from that same second
    ("Killing non-startable batch JobId=...: Job credential revoked"), failing the job."""
    pending = int(time.time())
    while int(time.time()) <= pending:
        time.sleep(0.02)
    subprocess.run(
        ["scontrol", "update", f"jobid={job_id}", "StartTime=now"],
        env=env,
        capture_output=True,
        check=True,
        timeout=30,
    )
