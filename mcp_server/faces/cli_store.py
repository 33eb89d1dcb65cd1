"""Command-line parsers of the wheel store and of recreating a bound engine: store, recreate."""

from __future__ import annotations

from mcp_server.faces.cli_base import (
    PYTHON_HELP,
    WORKSPACE_HELP,
    Subparsers,
    add_json,
    add_operation,
)


def add_commands(sub: Subparsers) -> None:
    p = add_operation(
        sub, "store", "the wheel store: list, verify, keep, gc --keep-bound WORKSPACE...",
        description="Look after the content-addressed store of the wheels automl-setup built "
        "and of the dependency wheels it keeps: list its entries, verify each against its hash, "
        "keep an experiment's whole bound closure (packed from the environment that holds it, "
        "so recreate needs no index or repository), or remove (gc) every wheel no binding in "
        "the named workspaces refers to.",
        example="automl-setup store list\nautoml-setup store keep --experiment-id ID "
        "--workspace runs\nautoml-setup store gc --keep-bound runs other-runs",
    )  # fmt: skip
    p.add_argument("action", choices=("list", "verify", "keep", "gc"), help="what to do")
    p.add_argument(
        "--keep-bound", nargs="+", default=(), metavar="WORKSPACE",
        help="gc: keep every wheel a binding in these workspaces refers to",
    )  # fmt: skip
    p.add_argument("--experiment-id", help="keep: the experiment whose bound closure to keep")
    p.add_argument("--workspace", help=f"keep: {WORKSPACE_HELP}")
    add_json(p)

    p = add_operation(
        sub, "recreate", "install an experiment's bound engine into a separate environment",
        description="Install exactly the engine build an experiment is bound to into another "
        "environment, from the wheel store (re-hashed) or rebuilt from the bound commit and "
        "checked against the binding, so the experiment can be resumed there.",
        example="automl-setup recreate --experiment-id ID --workspace runs --python .venv-bound "
        "--create-env",
    )  # fmt: skip
    p.add_argument("--experiment-id", required=True, help="exact experiment id (no guessing)")
    p.add_argument("--workspace", help=WORKSPACE_HELP)
    p.add_argument("--python", required=True, help=f"the new environment; {PYTHON_HELP}")
    p.add_argument("--create-env", action="store_true", help="create the venv if it is missing")
    add_json(p)

    p = add_operation(
        sub, "lock", "write a PEP 751 pylock.toml of an experiment's bound closure",
        description="Write the closure an experiment is bound to as a PEP 751 pylock.toml: "
        "the engine by its stored wheel and sha256, every dependency at its bound version with "
        "its index's hashes, VCS dependencies at their bound commits; `uv pip sync` installs "
        "it into a new environment. A new file only.",
        example="automl-setup lock --experiment-id ID --workspace runs --out pylock.toml",
    )  # fmt: skip
    p.add_argument("--experiment-id", required=True, help="exact experiment id (no guessing)")
    p.add_argument("--workspace", help=WORKSPACE_HELP)
    p.add_argument(
        "--out", help="a new pylock.toml or pylock.NAME.toml (default: beside the binding)"
    )
    add_json(p)
