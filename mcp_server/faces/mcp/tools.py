"""The MCP tools, made from the registry: one tool per row, its arguments from the request's fields
(`faces/registry/fields.py`: the field's description, the value type's bounds; an absolute path
for a path; strict booleans), but the fields the command line alone takes (`cli_only`) and
those the tool sets itself (`Tool.fixed`). Each tool checks its path arguments against the
client's roots, builds the request and runs the operation (`mcp_app.call`); install's asks the
user for the branch when none is given (elicitation).

The SDK builds a tool's argument model and schemas from its function's signature, so each tool
is a function with a made signature (`__signature__`, `__annotations__`): the SDK reads the
same parameters a written one would have.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, ElicitationResult, Resolve
from pydantic import BaseModel, Field

from mcp_server.faces.mcp.calls import call, reply_model, tool
from mcp_server.faces.mcp.inputs import BranchChoice, ProfileOption, ask_branch, chosen_branch
from mcp_server.faces.mcp.progress import MonotonicProgress
from mcp_server.faces.mcp.resources import StartedResources, started_reply
from mcp_server.faces.mcp.roots import Roots
from mcp_server.faces.registry import ROWS, Row
from mcp_server.faces.registry.fields import FieldShape, shapes

# The parameters every tool has besides its arguments: the SDK fills them in.
CONTEXT = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)
ROOTS = inspect.Parameter("roots", inspect.Parameter.KEYWORD_ONLY, annotation=Roots)
ASKED = inspect.Parameter(
    "asked",
    inspect.Parameter.KEYWORD_ONLY,
    annotation=Annotated[ElicitationResult[BranchChoice], Resolve(ask_branch)],
)


def argument_type(shape: FieldShape) -> Any:
    """The type the tool publishes for one field: bounded, described, strict."""
    if shape.is_profile:
        return ProfileOption
    description = shape.description
    kind = shape.kind
    if kind is not None:
        if kind.path:
            description = description.rstrip(".") + " (absolute path)."
        one: Any = Annotated[str, Field(min_length=kind.min_length, max_length=kind.max_length)]
    elif shape.value is bool:
        one = Annotated[bool, Field(strict=True)]
    elif shape.choices:
        one = Literal[shape.choices]
    else:
        one = shape.value
    bounds = published_bounds(shape)
    item_max = bounds.pop("item_max_length", None)
    if item_max is not None:
        one = Annotated[one, Field(max_length=item_max)]
    if shape.repeated:
        return Annotated[tuple[one, ...], Field(description=description, **bounds)]
    # `python=None` means $VIRTUAL_ENV to the core: a tool names its environment (the server's
    # own is nobody's), so a field the request requires is required here and never null.
    if shape.optional and not shape.required:
        return Annotated[one | None, Field(description=description, **bounds)]
    return Annotated[one, Field(description=description, **bounds)]


# The bounds a request field declares, published as is: those pydantic enforces
# (`Field(max_length=16)`), and those its own validator enforces with a message of its own,
# declared for the schema in `json_schema_extra` (`{"ge": 0, "le": MAX_GRACE_S}`).
BOUNDS = ("ge", "le", "gt", "lt", "min_length", "max_length", "item_max_length")


def published_bounds(shape: FieldShape) -> dict[str, Any]:
    found = {n: getattr(m, n) for m in shape.info.metadata for n in BOUNDS if hasattr(m, n)}
    declared = shape.info.json_schema_extra
    if isinstance(declared, dict):
        found.update({n: v for n, v in declared.items() if n in BOUNDS})
    return found


def parameters(op: Row[Any, Any]) -> list[inspect.Parameter]:
    """The tool's arguments, in the request's order, then what the SDK fills in."""
    found = []
    for shape in shapes(op.request):
        if shape.name in op.cli_only or shape.name in op.mcp.fixed:
            continue
        default = inspect.Parameter.empty if shape.required else shape.default
        if shape.is_profile:
            default = None  # the project's engine: resolved from the client's first root
        elif shape.name == "branch" and op.mcp.asks_branch:
            default = None  # asked for instead: the request refuses a missing branch itself
        found.append(
            inspect.Parameter(
                shape.name,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=argument_type(shape),
                default=default,
            )
        )
    return [*found, CONTEXT, ROOTS, *([ASKED] if op.mcp.asks_branch else [])]


# What a tool adds to its reply, by operation: a hook `after(request, result)` and the model of
# the fields it adds (a started engine's resource URIs: launch, resume).
ReplyHook = Callable[[Any, Any], dict[str, Any]]
REPLY_ADDS: dict[str, tuple[ReplyHook, type[BaseModel]]] = {
    "launch": (started_reply, StartedResources),
    "resume": (started_reply, StartedResources),
}


def make_tool(op: Row[Any, Any]) -> Any:
    """The tool function of operation `op`, registered with the server."""
    after, extra = REPLY_ADDS.get(op.command, (None, None))
    steps = op.steps
    model: type[BaseModel] = op.result
    result = reply_model(model, *((extra,) if extra else ()))

    async def run_tool(**arguments: Any) -> Any:
        ctx, roots = arguments.pop("ctx"), arguments.pop("roots")
        if op.mcp.asks_branch:
            arguments["branch"] = chosen_branch(arguments.pop("asked"))
        tracker = MonotonicProgress(ctx, steps) if steps is not None else None
        return await call(
            ctx,
            roots,
            op.command,
            tracker=tracker,
            after=after,
            extra=extra,
            **op.mcp.fixed,
            **arguments,
        )

    signature = inspect.Signature(parameters(op), return_annotation=result)
    run_tool.__signature__ = signature  # type: ignore[attr-defined]
    run_tool.__annotations__ = {
        **{p.name: p.annotation for p in signature.parameters.values()},
        "return": result,
    }
    run_tool.__name__ = run_tool.__qualname__ = op.tool
    run_tool.__doc__ = op.mcp.description
    return tool(op.command)(run_tool)


def register_tools() -> None:
    for op in ROWS:
        make_tool(op)
