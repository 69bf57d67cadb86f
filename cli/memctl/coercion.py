"""Typer's coercion of command-line values, without pydantic where it has nothing to do.

Typer (0.29) turns each value a command receives into its parameter's type with a pydantic
TypeAdapter, built when the parameter is first parsed, and importing pydantic takes longer
than a read command's whole work. Most values need nothing: a missing one (None), a str for
a str parameter, an int (its default) or plain digits for an int one, within its bounds, a
bool for a flag.
Those are handed over as Typer's adapter would hand them; any other value (an int option's
"abc" or "0") goes to Typer's own coercion, which says what is wrong with it as before.

It hooks into Typer where each parameter keeps its coercion (`_runtime_param`, built on
first use); a Typer without that hook is left as it is.
"""

from __future__ import annotations

from typing import Any


class _PlainFirst:
    """A parameter's coercion: plain values as they are, the rest by Typer's own."""

    def __init__(self, annotation: type, minimum: float | None, maximum: float | None) -> None:
        self.annotation = annotation
        self.minimum = minimum
        self.maximum = maximum

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if value is None:  # a single value missing: Typer hands over None
            return None
        if self.annotation is str and isinstance(value, str):
            return str(value)
        if self.annotation is bool and isinstance(value, bool):
            return value
        if self.annotation is int:
            number = _plain_int(value)
            if number is not None and self._within(number):
                return number
        from typer._coercion import build_runtime_param

        return build_runtime_param(param.type_descriptor).coerce(value, param=param, ctx=ctx)

    def _within(self, number: int) -> bool:
        return (self.minimum is None or number >= self.minimum) and (
            self.maximum is None or number <= self.maximum
        )


def _plain_int(value: Any) -> int | None:
    """`value` as pydantic reads it into an int, when that is plain: an int, or digits."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    return None


def plain_values_first(command: Any) -> None:
    """Give each str, int or bool parameter of `command` and of its subcommands, its help
    option too (made when first parsed), the coercion above, unless Typer has one already."""
    for param in command.params:
        _plain_first(param)
    made = getattr(command, "get_help_option", None)
    if made is not None and getattr(command, "_help_option", False) is None:

        def help_option(ctx: Any) -> Any:
            option = made(ctx)
            if option is not None:
                _plain_first(option)
            return option

        command.get_help_option = help_option
    for subcommand in getattr(command, "commands", {}).values():
        plain_values_first(subcommand)


def _plain_first(param: Any) -> None:
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None or getattr(param, "_runtime_param", False) is not None:
        return  # not Typer's parameter, coerced already, or not a Typer that keeps it there
    info = descriptor.parameter_info
    plain = (
        descriptor.annotation in (str, int, bool)
        and descriptor.file_annotation is None
        and getattr(info, "parser", None) is None
        and not getattr(info, "clamp", False)
        and not param.multiple
        and param.nargs == 1
    )
    if plain:
        param._runtime_param = _PlainFirst(
            descriptor.annotation, getattr(info, "min", None), getattr(info, "max", None)
        )
