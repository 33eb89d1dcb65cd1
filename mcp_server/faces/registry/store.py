"""The rows of the wheel store's operations: store, recreate, lock."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp_server.faces.registry.row import (
    STALL_FLAG,
    Flag,
    Hints,
    Operation,
    Row,
    Tool,
    own_exit_code,
    reporting,
)

if TYPE_CHECKING:
    from mcp_server.experiments.lock import LockQuery, LockResult
    from mcp_server.experiments.recreate import RecreateRequest, RecreateResult
    from mcp_server.experiments.storeops import StoreReport, StoreRequest


def _store_request() -> type[StoreRequest]:
    from mcp_server.experiments.storeops import StoreRequest

    return StoreRequest


def _recreate_request() -> type[RecreateRequest]:
    from mcp_server.experiments.recreate import RecreateRequest

    return RecreateRequest


def _lock_request() -> type[LockQuery]:
    from mcp_server.experiments.lock import LockQuery

    return LockQuery


def _store() -> Operation[StoreRequest, StoreReport]:
    from mcp_server.experiments.storeops import StoreReport, run_store
    from mcp_server.faces.render.store import store_text

    return Operation(run_store, StoreReport, store_text)


def _recreate() -> Operation[RecreateRequest, RecreateResult]:
    from mcp_server.environment.install import STEPS
    from mcp_server.experiments.recreate import RecreateResult, recreate_engine
    from mcp_server.faces.render.store import recreate_text

    return reporting(recreate_engine, RecreateResult, recreate_text, STEPS)


def _lock() -> Operation[LockQuery, LockResult]:
    from mcp_server.experiments.lock import STEPS, LockResult, lock_experiment
    from mcp_server.faces.render.store import lock_text

    return reporting(lock_experiment, LockResult, lock_text, STEPS)


ROWS: tuple[Row[Any, Any], ...] = (
    Row(
        command="store",
        tool="store_wheels",
        operation=_store,
        load_request=_store_request,
        summary="the wheel store: list, verify, keep, gc --keep-bound WORKSPACE...",
        description=(
            "Look after the content-addressed store of the wheels automl-setup built and of the "
            "dependency wheels it keeps: list its entries, verify each against its hash, keep an "
            "experiment's whole bound closure (packed from the environment that holds it, so "
            "recreate needs no index or repository), or remove (gc) every wheel no binding in the "
            "named workspaces refers to."
        ),
        example=(
            "automl-setup store list\n"
            "automl-setup store keep --experiment-id ID --workspace runs\n"
            "automl-setup store gc --keep-bound runs other-runs"
        ),
        title="List, verify, keep into or garbage-collect the wheel store",
        hints=Hints(read_only=False, destructive=True, idempotent=True, open_world=False),
        exit_rule=own_exit_code,
        flags={
            "action": Flag(positional=True, help="what to do"),
            "keep_bound": Flag(nargs="+", metavar="WORKSPACE"),
        },
        mcp=Tool(
            "The content-addressed wheel store: list its entries, verify every entry's bytes "
            "against its sha256, keep (with experiment_id and workspace) every member of the "
            "experiment's bound dependency closure, packed from the environment that holds it, so "
            "recreate_engine needs no index or repository; or gc: remove every wheel no binding "
            "in the keep_bound workspaces refers to.",
        ),
    ),
    Row(
        command="recreate",
        tool="recreate_engine",
        operation=_recreate,
        load_request=_recreate_request,
        summary="install an experiment's bound engine into a separate environment",
        description=(
            "Install exactly the engine build an experiment is bound to into another environment, "
            "from the wheel store (re-hashed) or rebuilt from the bound commit and checked against "
            "the binding, so the experiment can be resumed there."
        ),
        example="automl-setup recreate --experiment-id ID --workspace runs --python .venv-bound "
        "--create-env",
        title="Recreate an experiment's bound engine",
        hints=Hints(read_only=False, destructive=False, idempotent=True, open_world=True),
        flags=STALL_FLAG,
        mcp=Tool(
            "Install exactly the engine build the experiment is bound to into the separate "
            "environment `python`: from the wheel store (offline) or by rebuilding the bound "
            "commit (refused unless the wheel's sha256 is the bound one); then checked field by "
            "field against the binding, so resume_experiment with that python is accepted.",
        ),
    ),
    Row(
        command="lock",
        tool="lock_experiment",
        operation=_lock,
        load_request=_lock_request,
        summary="write a PEP 751 pylock.toml of an experiment's bound closure",
        description=(
            "Write the closure an experiment is bound to as a PEP 751 pylock.toml: the engine by "
            "its stored wheel and sha256, every dependency at its bound version with its index's "
            "hashes, VCS dependencies at their bound commits; `uv pip sync` installs it into a new "
            "environment. A new file only."
        ),
        example="automl-setup lock --experiment-id ID --workspace runs --out pylock.toml",
        title="Write a PEP 751 lock of an experiment's bound closure",
        hints=Hints(read_only=False, destructive=False, idempotent=True, open_world=True),
        flags=STALL_FLAG,
        mcp=Tool(
            "Write the closure the experiment is bound to as a PEP 751 pylock.toml (the engine by "
            "its stored wheel and sha256, every dependency at its bound version or commit), which "
            "`uv pip sync` installs into a new environment.",
        ),
    ),
)
