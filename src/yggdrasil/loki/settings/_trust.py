"""The user's trust in a project's settings tables, and what changed since.

``trusted.json`` in the user's configuration folder maps each trusted table's path to a
hash of its content and the table itself: the hash decides (a changed table is untrusted
again), the table says what changed, in the warning that the trust no longer holds. Trust
is keyed by the table, not the file, so an edit elsewhere in ``pyproject.toml`` (a
dependency) keeps it and one to ``[tool.loki]`` ends it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._layers import config_dir, project_tables

TRUST_FILE = "trusted.json"
SHOWN_CHANGES = 12  # changes listed in a warning before "and N more"


@dataclass(frozen=True)
class Trusted:
    """A table as the user trusted it: its hash, and the table (None when an older loki
    recorded only the hash)."""

    hash: str
    table: dict[str, Any] | None = None


def table_hash(table: Mapping[str, Any]) -> str:
    """What trust is keyed by: the table's content, not the file's bytes."""
    return hashlib.sha256(_canonical(table).encode()).hexdigest()


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=True)


def trusted(env: Mapping[str, str]) -> dict[str, Trusted]:
    """The user's trusted project tables by path (a store that cannot be read: none)."""
    try:
        data = json.loads((config_dir(env) / TRUST_FILE).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    found = {}
    for path, entry in data.items():
        if isinstance(entry, str):  # an older store: path -> hash
            found[str(path)] = Trusted(entry)
        elif isinstance(entry, dict) and isinstance(entry.get("hash"), str):
            table = entry.get("table")
            found[str(path)] = Trusted(entry["hash"], table if isinstance(table, dict) else None)
    return found


def trust(root: str | os.PathLike[str], env: Mapping[str, str] | None = None, *,
          revoke: bool = False) -> list[Path]:
    """Trust (or stop trusting) the project tables of ``root`` as they are now; their files."""
    env = os.environ if env is None else env
    known = trusted(env)
    files = []
    for path, table in project_tables(Path(root).resolve()):
        files.append(path)
        if revoke:
            known.pop(str(path), None)
        else:
            known[str(path)] = Trusted(table_hash(table), json.loads(_canonical(table)))
    folder = config_dir(env)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{TRUST_FILE}.{os.getpid()}"
    stored = {path: {"hash": t.hash, "table": t.table} for path, t in known.items()}
    tmp.write_text(json.dumps(stored, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, folder / TRUST_FILE)
    return files


def changed_since(record: Trusted, table: Mapping[str, Any]) -> str:
    """What changed in a trusted table, for the warnings about what it may no longer do."""
    if record.table is None:
        return "changed since you trusted it (what changed is not known: an older loki trusted it)"
    changes = table_changes(record.table, table)
    shown = changes[:SHOWN_CHANGES]
    more = len(changes) - len(shown)
    return ("changed since you trusted it (" + "; ".join(shown)
            + (f"; and {more} more" if more > 0 else "") + ")")


def table_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """Each key that differs between two tables, as ``key: old -> new``, ``added key =
    new`` or ``removed key`` (nested tables by dotted keys)."""
    old, new = dict(_leaves(before)), dict(_leaves(after))
    changes = []
    for key in [*old, *(k for k in new if k not in old)]:
        if key not in new:
            changes.append(f"removed {key} = {old[key]}")
        elif key not in old:
            changes.append(f"added {key} = {new[key]}")
        elif old[key] != new[key]:
            changes.append(f"{key}: {old[key]} -> {new[key]}")
    return changes


def _leaves(table: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    for key, value in table.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            yield from _leaves(value, dotted + ".")
        else:
            yield dotted, _canonical(value)
