"""The settings table of the docs (docs/configuration.md), made from the fields' declarations.

``python docs/_ext/settings_table.py`` writes it into the page; tests/test_settings_docs.py
fails when the page's table is not what the declarations make.
"""

from __future__ import annotations

import json
import typing
from typing import Any

from ._model import Group, SettingField, Settings, setting_fields
from ._spec import COMBINE_TEXT, UNSET, Flag

SHOWN_ITEMS = 3  # items of a long default list shown before "..."


def settings_table() -> str:
    """Markdown: one table per group, one row per field (its default, what it is, how
    layers combine it, what an untrusted project may do with it, its flags, keyword and
    environment variable)."""
    fields = setting_fields()
    parts = []
    for group, title in _groups():
        rows = [f for f in fields.values() if f.group == group]
        head = ("| setting | default | what it is | layers | an untrusted project | flag | "
                "keyword | variable |\n| --- | --- | --- | --- | --- | --- | --- | --- |")
        parts.append(f"### {title}\n\n{head}\n" + "\n".join(_row(f) for f in rows))
    return "\n\n".join(parts) + "\n"


def _groups() -> list[tuple[str, str]]:
    found = [("", "(top level)")]
    for name, info in Settings.model_fields.items():
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, Group):
            doc = (kind.__doc__ or "").strip().split("\n")[0].rstrip(".")
            found.append((name, f"`{name}`: {_cell(doc)}"))
    return found


def _row(field: SettingField) -> str:
    spec = field.setting
    if field.python_only:
        layers = untrusted = "Python only"
        variable = ""
    else:
        layers = COMBINE_TEXT[spec.combine]
        untrusted = spec.tighter.describe()
        names = ["LOKI_" + field.dotted.upper().replace(".", "__"), *spec.env]
        variable = ", ".join(f"`{n}`" for n in names)
    flags = ", ".join(_flag(f, field) for f in spec.flags)
    keyword = f"`{spec.keyword}`" if spec.keyword else ""
    cells = [f"`{field.dotted}`", _default(field), _cell(field.help), layers, untrusted,
             flags, keyword, variable]
    return "| " + " | ".join(cells) + " |"


def _flag(flag: Flag, field: SettingField) -> str:
    shown = flag.name
    choices = _choices(field.info.annotation)
    if flag.negatable:
        shown += f"`, `--no-{flag.name[2:]}"
    elif flag.const is not UNSET or field.info.annotation is bool:
        pass
    elif choices:
        shown += " " + "\\|".join(choices)
    elif flag.metavar:
        shown += f" {flag.metavar}"
    return f"`{shown}`"


def _choices(kind: Any) -> list[str]:
    if typing.get_origin(kind) is typing.Literal:
        return [str(c) for c in typing.get_args(kind)]
    return []


def _default(field: SettingField) -> str:
    if field.python_only:
        return "`None`"
    value = field.default
    if isinstance(value, tuple) and len(value) > SHOWN_ITEMS:
        head = ", ".join(json.dumps(v) for v in value[:SHOWN_ITEMS])
        return _cell(f"`[{head}, ...]` ({len(value)} in all)")
    return _cell(f"`{json.dumps(value, default=str)}`")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace("\n", " ")
