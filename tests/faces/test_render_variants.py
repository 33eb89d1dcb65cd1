"""Every result renders, whatever it holds: each operation's result model is built in its
variants (every optional field null and every list empty; every field present; each branch of
every union and literal: a reviewed wheel's null commit, a format-1 record, an empty history)
and shown through both faces, the command line's text and --json and the MCP reply, and none
may raise. The models are built without validation (`model_construct`): a renderer must not
depend on more than a result's type says."""

from __future__ import annotations

import json
import types
import typing
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from mcp_server.faces.mcp.calls import reply_model
from mcp_server.faces.mcp.tools import REPLY_ADDS
from mcp_server.faces.registry import ROWS, Row

MAX_DEPTH = 6


class Variant:
    """Which variant to build: `nulls` (None wherever allowed), `lists` (one element in every
    list and dict, or none), and which alternative of each union or literal (the n-th, or the
    last when there are fewer)."""

    def __init__(self, nulls: bool, lists: bool, choice: int = 0) -> None:
        self.nulls, self.lists, self.choice = nulls, lists, choice
        self.empty = nulls and not lists

    def pick(self, options: tuple[Any, ...]) -> Any:
        return options[min(self.choice, len(options) - 1)]


def sample(tp: Any, variant: Variant, depth: int = 0) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return sample(args[0], variant, depth)
    if origin in (typing.Union, types.UnionType):
        options = tuple(a for a in args if a is not type(None))
        if type(None) in args and (variant.nulls or depth >= MAX_DEPTH):
            return None
        return sample(variant.pick(options), variant, depth + 1)
    if origin is Literal:
        return variant.pick(args)
    if origin in (list, tuple, set, frozenset):
        if not variant.lists or depth >= MAX_DEPTH:
            return [] if origin is list else ()
        one = sample(args[0], variant, depth + 1)
        return [one] if origin is list else (one,)
    if origin is dict:
        if not variant.lists or depth >= MAX_DEPTH:
            return {}
        return {"name": sample(args[1], variant, depth + 1)}
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return construct(tp, variant, depth + 1)
    if tp is bool:
        return not variant.empty
    if tp is int:
        return 0 if variant.empty else 3
    if tp is float:
        return 0.0 if variant.empty else 1.5
    if tp in (str, Any) or (isinstance(tp, type) and issubclass(tp, str)):
        return "" if variant.empty and tp is str else "0123456789abcdef0123"
    return None


def construct(model: type[BaseModel], variant: Variant, depth: int = 0) -> BaseModel:
    fields = {
        name: sample(info.annotation, variant, depth) for name, info in model.model_fields.items()
    }
    return model.model_construct(**fields)


def alternatives(model: type[BaseModel], depth: int = 0) -> int:
    """The most alternatives of any union or literal in the model, at any depth."""
    most = 1

    def walk(tp: Any, d: int) -> None:
        nonlocal most
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if d > MAX_DEPTH:
            return
        if origin in (typing.Union, types.UnionType, Literal):
            most = max(most, len([a for a in args if a is not type(None)]))
        for arg in args:
            walk(arg, d + 1)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            for info in tp.model_fields.values():
                walk(info.annotation, d + 1)

    walk(model, depth)
    return most


def variants(model: type[BaseModel]) -> list[Variant]:
    """Nothing at all; lists of entries whose optional fields are all null (a history of
    reviewed wheels: no commit); then everything present, once per alternative."""
    everything = [Variant(False, True, n) for n in range(alternatives(model))]
    return [Variant(True, False), Variant(True, True), *everything]


@pytest.mark.parametrize("op", ROWS, ids=lambda op: op.command)
def test_every_variant_of_a_result_renders_on_both_faces(op: Row) -> None:
    _after, extra = REPLY_ADDS.get(op.command, (None, None))
    reply = reply_model(op.result, *((extra,) if extra else ()))
    for variant in variants(op.result):
        result = construct(op.result, variant)
        text = op.render(result)  # the command line's text, and the reply's message
        assert isinstance(text, str)
        op.exit_code(result)
        json.loads(result.model_dump_json(warnings=False))  # --json
        fields = {**result.__dict__, "message": text}
        if extra is not None:
            fields.update(construct(extra, variant).__dict__)
        reply.model_construct(**fields).model_dump(mode="json", warnings=False)  # the MCP reply
