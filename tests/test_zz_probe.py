import pytest
from pathlib import Path

@pytest.mark.shares_installed_env
def test_zz_probe(installed_env: Path) -> None:
    print("EXPERIMENTS DIR:", (installed_env / ".automl-setup" / "experiments").exists())
