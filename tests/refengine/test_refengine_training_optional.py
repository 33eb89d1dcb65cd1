"""torch stays optional: the engine's own modules import in an interpreter where torch (and
transformers, safetensors) cannot be imported; only automl_refengine.training needs them."""

from __future__ import annotations

import subprocess
import sys

from support.refengine import engine_env

BLOCK_AND_IMPORT = """
import importlib, pkgutil, sys
for name in ("torch", "transformers", "safetensors"):
    sys.modules[name] = None  # any import of it raises ImportError
import automl_refengine, automl_refengine.workloads
names = [
    m.name
    for package in (automl_refengine, automl_refengine.workloads)
    for m in pkgutil.iter_modules(package.__path__, package.__name__ + ".")
    if m.name not in ("automl_refengine.training", "automl_refengine.__main__")
]
for name in names:
    importlib.import_module(name)
try:
    import automl_refengine.training
except ImportError as exc:
    print("training needs:", exc)
print("imported", len(names))
"""


def test_engine_imports_without_torch() -> None:
    result = subprocess.run(
        [sys.executable, "-c", BLOCK_AND_IMPORT],
        env=engine_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "training needs: import of torch halted" in result.stdout
    assert int(result.stdout.rsplit("imported ", 1)[1]) >= 10  # every other module imported
