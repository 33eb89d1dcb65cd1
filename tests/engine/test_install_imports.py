"""An install imports what it runs: into a new environment no experiment can be bound to its
engine, so the experiments layer (the install guard's question) and the store's and
recreate's result models (their texts live beside the install's) stay unimported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import profile_args
from support.engines import new_source_repo

# The command line as `automl-setup ARGS` runs it, then the modules it imported, last.
RUN_AND_LIST = """
import sys
from mcp_server.faces.cli.main import main
code = main(sys.argv[1:])
print("\\nIMPORTED " + " ".join(sorted(sys.modules)))
sys.exit(code)
"""
NOT_INSTALL = (
    "mcp_server.experiments.registered",
    "mcp_server.experiments.binding",
    "mcp_server.experiments.recreate",
    "mcp_server.experiments.storeops",
    "mcp_server.experiments.lock",
)


@pytest.mark.slow
def test_an_install_into_a_new_environment_imports_no_experiments_module(tmp_path: Path) -> None:
    repo = new_source_repo(tmp_path / "repo")
    args = ["install", "--branch", "main", "--python", str(tmp_path / "env"), "--create-env"]
    proc = subprocess.run(
        [sys.executable, "-c", RUN_AND_LIST, *args, *profile_args(repo)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"},
        timeout=300,
        check=False,
    )
    output, _, listed = proc.stdout.rpartition("\nIMPORTED ")
    assert proc.returncode == 0 and output.startswith("installed: "), proc.stdout + proc.stderr
    assert sorted(set(NOT_INSTALL) & set(listed.split())) == []
