"""An operation's flags, made from its request's fields (`faces/registry/fields.py`): `--field-name`
for each field, its description as the help, the request's default, `store_true` for a bool, a
repeatable flag for a tuple, choices for a Literal; the row's `flags` and `exclusive` say where
the command line departs from that rule. The python and workspace flags fall back to the project
file, so they are never required here (commands.request_fields).

A command's flags are added when that command is parsed or its help is asked for
(`LazySubParsers`): building the parser imports no request of another area, so a command imports
only what it runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from mcp_server.faces.registry import Flag, Row
from mcp_server.faces.registry.fields import FieldShape, shapes

# The command line's own fallbacks: named in the help, and never required.
FALLBACK = {
    "python": "the project file's, else $VIRTUAL_ENV",
    "workspace": "the project file's workspace",
}
PROFILE_GROUP = (
    "engine profile (flags > --profile FILE > $AUTOML_SETUP_PROFILE > the project file "
    "[tool.automl-setup] or automl-setup.toml > the built-in default)"
)
PROFILE_FLAGS = (
    ("--profile", "TOML profile file"),
    ("--repository", "git URL: https://, ssh://, git@host:path, file://"),
    ("--subdirectory", "path of the engine package in the repository"),
    ("--distribution", "distribution name the wheel must have"),
    ("--requirement", "version specifier the wheel must satisfy"),
)


def add_profile_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(PROFILE_GROUP)
    for flag, text in PROFILE_FLAGS:
        if flag == "--profile":
            group.add_argument(flag, help=text, type=_path)
        else:
            group.add_argument(flag, help=text)


def _path(text: str) -> Any:
    from pathlib import Path

    return Path(text)


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def help_text(shape: FieldShape, flag: Flag) -> str:
    """The field's description, and the command line's own default where it has one."""
    text = flag.help or shape.description.rstrip(".")
    if shape.name in FALLBACK and "default" not in text:
        text += f" (default: {FALLBACK[shape.name]})"
    elif flag.default is not None:
        text += f" (default: {flag.default})"
    elif shape.default not in (None, False, (), []) and not shape.choices:
        text += (
            f" (default: {shape.default:g})"
            if isinstance(shape.default, float)
            else (f" (default: {shape.default})")
        )
    return text


def argument(shape: FieldShape, flag: Flag) -> tuple[list[str], dict[str, Any]]:
    """The names and keywords of `add_argument` for one field."""
    names = [shape.name] if flag.positional else [flag.name or flag_name(shape.name)]
    options: dict[str, Any] = {"help": help_text(shape, flag)}
    if not flag.positional:
        options["dest"] = shape.name
    if shape.value is bool:
        options["action"] = "store_true"
        return names, options
    if shape.choices:
        options["choices"] = shape.choices
    elif shape.value in (int, float):
        options["type"] = shape.value
    if flag.nargs:
        options["nargs"] = flag.nargs
        options["default"] = ()
    elif shape.repeated or flag.more:
        options["action"] = "append"
        options["default"] = []
    if flag.metavar:
        options["metavar"] = flag.metavar
    default = flag.default if flag.default is not None else shape.default
    if not (shape.repeated or flag.more) and default is not None:
        options["default"] = default
    if (
        shape.required
        and shape.name not in FALLBACK
        and flag.default is None
        and not (flag.positional)
    ):
        options["required"] = True
    return names, options


def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def add_flags(parser: argparse.ArgumentParser, op: Row[Any, Any]) -> None:
    """Every flag of operation `op`: its request's fields (but those of the MCP face only), the
    profile group, --json."""
    add_fields(parser, op)
    add_json(parser)


def add_fields(
    parser: argparse.ArgumentParser, op: Row[Any, Any], only: tuple[str, ...] | None = None
) -> None:
    """The flags of `op`'s request fields (`only` these, when given)."""
    exclusive: dict[str, Any] = {}
    for names in op.exclusive:
        group = parser.add_mutually_exclusive_group()
        exclusive.update(dict.fromkeys(names, group))
    profile = False
    gathered = {flag.more for flag in op.flags.values() if flag.more}  # no flag of their own
    for shape in shapes(op.request):
        if shape.name in op.mcp_only or shape.name in gathered:
            continue
        if only is not None and shape.name not in only:
            continue
        if shape.is_profile:
            profile = True
            continue
        flags, options = argument(shape, op.flags.get(shape.name, Flag()))
        exclusive.get(shape.name, parser).add_argument(*flags, **options)
    if profile:
        add_profile_flags(parser)


class LazySubParsers(argparse._SubParsersAction):  # type: ignore[type-arg]
    """Subcommands whose flags are added when they are parsed (argparse calls the action of
    the chosen subcommand only): `Parser.populate` adds them."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        assert isinstance(values, list) and values
        chosen = self._name_parser_map.get(values[0])
        populate: Callable[[], None] | None = getattr(chosen, "populate", None)
        if populate is not None:
            populate()
        super().__call__(parser, namespace, values, option_string)


def populate_all(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Every subcommand's flags now (completion, the reference docs, the tests walk them all)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                populate: Callable[[], None] | None = getattr(child, "populate", None)
                if populate is not None:
                    populate()
                populate_all(child)
    return parser
