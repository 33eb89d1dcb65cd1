"""The environment section of the record sees torch (with its CUDA build) when present.

CI installs the CPU wheel of torch into the project venv (.ci/run); the target venv sees it
through a .pth file, so the probe reads a real torch distribution without a second copy."""

from __future__ import annotations

import sysconfig
from importlib import metadata
from pathlib import Path

import pytest
from support.engines import make_venv

from mcp_server.environment.identity import environment_info
from mcp_server.environment.target import locate


def test_probe_reports_torch_version_and_cuda_build(tmp_path: Path) -> None:
    # Only this test needs torch: the bare-venv one below runs without it.
    torch = pytest.importorskip("torch", reason="torch is an optional extra; .ci/run installs it")
    env_dir = make_venv(tmp_path / "env")
    site = next((env_dir / "lib").glob("python*/site-packages"))
    (site / "project-site.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    probe = locate(str(env_dir)).probe([])
    info = environment_info(probe, [])
    assert info.watched["torch"] == torch.__version__
    assert info.torch_cuda == torch.version.cuda  # None for the CPU build
    # gepa (the `prompts` extra) is seen the same way when the project venv holds it.
    assert info.watched["gepa"] == _version_or_none("gepa")


def _version_or_none(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def test_probe_reports_no_torch_in_a_bare_venv(tmp_path: Path) -> None:
    probe = locate(str(make_venv(tmp_path / "bare"))).probe([])
    info = environment_info(probe, [])
    assert info.watched == {"gepa": None, "torch": None}
    assert info.torch_cuda is None
