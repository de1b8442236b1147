"""What a setting is beyond its type, default and help: the marker each field carries.

A field of :class:`~._model.Settings` is declared once, as
``Annotated[type, Setting(...)] = Field(default, description=help)``; the ``Setting``
says how layers combine it, which way is tighter (``_tighten``), the keyword of
``filesystem_toolbox`` that sets it, its command-line flags and its older environment
names. The layering, the tighten check, the keywords, the flags, ``loki config`` and the
docs' table all read it, so adding a setting is its field, the code that enforces it, and
tests (as ruff's and uv's one options struct, whose attributes make the CLI, the files
and the docs; pydantic-settings reads its sources the same way from the model's fields).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ._tighten import FIXED, Direction

Combine = Literal["replace", "append", "prepend", "merge"]
COMBINE_TEXT = {"replace": "replaces", "append": "adds to the list below",
                "prepend": "goes before the list below", "merge": "merges by key"}


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclass(frozen=True)
class Flag:
    """A command-line flag that fills a setting.

    The field's type makes its shape: a yes/no is a switch (``const``: the value it sets,
    True unless given; ``negatable``: ``--no-NAME`` too), a choice takes one of its values,
    a number or a text takes one, a list or a table is repeatable (each given text turned
    into one item by ``item``). ``resets``: the field starts again from ``const`` before
    the field's other flags add to it (``--no-protect --protect '*.db'``). Two flags of one
    field given together contradict each other unless one resets. ``help``: when the
    field's description does not read as the flag's help.
    """

    name: str
    metavar: str | None = None
    const: Any = UNSET
    item: Callable[[str], Any] | None = None
    negatable: bool = False
    resets: bool = False
    help: str = ""


@dataclass(frozen=True)
class Setting:
    """How a field of Settings is filled and judged (see the module's docstring).

    ``combine``: what a layer's value does to the one below (``replace``; ``append`` to a
    list, ``prepend`` for rules a higher layer matches first; ``merge`` a table by key).
    ``tighter``: the direction an untrusted project may move it. ``keyword``: its keyword
    of ``filesystem_toolbox`` (a keyword replaces the field whatever ``combine`` says).
    ``flags``: its command-line flags, each offered by the commands of its group (``agent``
    flags by ``loki do``, ``mcp`` flags by ``loki mcp``, the others by every command that
    opens a toolbox). ``env``: older variable names beside ``LOKI_<GROUP>__<FIELD>``.
    """

    combine: Combine = "replace"
    tighter: Direction = FIXED
    keyword: str | None = None
    flags: tuple[Flag, ...] = ()
    env: tuple[str, ...] = ()
