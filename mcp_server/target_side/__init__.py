"""Code run in another interpreter: each module here is a script that a target environment's
own interpreter runs by path, isolated and writing nothing (`command`), so that what it reports
is what that environment itself sees. They import only the standard library (the target has no
automl-setup, no pydantic) and run on any Python >= 3.8 (ruff.toml beside them lints them for
3.8); tests import them to call their functions directly."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent


def script(module: str) -> Path:
    """The file of the module `module` of this package."""
    return HERE / f"{module}.py"


def command(interpreter: Path, module: str, *args: str) -> list[str]:
    """argv that runs `module` in `interpreter`: `-I` keeps the script's folder, PYTHONPATH and
    the user's site off its import path (so nothing here shadows the environment's modules);
    `-B` writes no bytecode into the environment, whose files are what verify vouched for."""
    return [str(interpreter), "-I", "-B", str(script(module)), *args]
