"""A Toolbox: the tools of one run, how the model calls them, and what the run changed."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..errors import ToolDefinitionError, ToolError
from ..files import Journal, Reverted, clip_text
from ._schema import bind_args
from ._tool import Tool

__all__ = ["Toolbox"]

log = logging.getLogger("yggdrasil.loki.tools")


@dataclass
class Toolbox:
    """A named set of tools plus the run state the loop reports on.

    ``changed`` lists every root-relative file the run created, modified or deleted (by the
    write/edit tools and by commands), in first-touch order; ``changes`` maps each of them
    to its status against the start of the run: ``created``, ``modified``, ``deleted`` or
    ``transient`` (created and gone again). ``revert()`` undoes the run where it can.
    """

    tools: dict[str, Tool] = field(default_factory=dict)
    changed: list[str] = field(default_factory=list)
    status: str = field(default="", compare=False)
    journal: Journal | None = field(default=None, repr=False, compare=False)

    def add(self, tool: Tool) -> Tool:
        """Register a tool; a second tool with the same name is a definition error."""
        if tool.name in self.tools:
            raise ToolDefinitionError(f"a tool named {tool.name!r} is already in the toolbox")
        self.tools[tool.name] = tool
        return tool

    def tool(self, fn: Callable[..., str] | None = None, *, mutates: bool = False) -> Any:
        """Decorator form of ``add(Tool.from_function(fn))``."""
        def register(f: Callable[..., str]) -> Callable[..., str]:
            self.add(Tool.from_function(f, mutates=mutates))
            return f
        return register(fn) if fn is not None else register

    def names(self) -> list[str]:
        """The tool names, in catalog order (as the original Loki's ``Toolbox.names()``)."""
        return list(self.tools)

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self.tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools.values())

    def __len__(self) -> int:
        return len(self.tools)

    def record(self, path: str) -> None:
        """Note a root-relative path as changed (first touch only)."""
        if path not in self.changed:
            self.changed.append(path)

    @property
    def changes(self) -> dict[str, str]:
        """Each changed path's status against the start of the run, from the journal."""
        entries = self.journal.entries if self.journal is not None else {}
        return {p: entries[p].status if p in entries else "modified" for p in self.changed}

    def revert(self, paths: Iterable[str] | None = None) -> Reverted:
        """Undo this run's file changes where the original is known; never raises per path.

        ``paths`` (root-relative or absolute inside the root) limits the undo to those files.

        Files the write/edit tools changed get their original bytes and mode back. Files
        a command changed or deleted before a tool had kept a copy are listed in
        ``not_reverted`` with the reason. Files the run created (by any tool) are removed,
        with the folders made for them, only when nothing else is lost; otherwise they may
        hold the lost data and are kept (listed too). Reverted paths leave ``changed``.
        """
        if self.journal is None:
            return Reverted()
        before = set(self.journal.entries)
        done = self.journal.revert(None if paths is None else self.journal.relative(paths))
        gone = before - set(self.journal.entries)
        self.changed[:] = [p for p in self.changed if p not in gone]
        return done

    def spec(self) -> str:
        """The tool catalog as prompt text: one block per tool."""
        blocks = [tool.spec() for tool in self.tools.values()]
        if self.status:
            blocks.append(self.status)
        return "\n\n".join(blocks)

    def schemas(self) -> list[dict[str, Any]]:
        """Neutral tool schemas (name, description, input_schema) for native tool calling."""
        return [{"name": t.name, "description": t.description, "input_schema": t.input_schema}
                for t in self.tools.values()]

    def to_dict(self) -> dict[str, Any]:
        return {"tools": [t.to_dict() for t in self.tools.values()],
                "changed": list(self.changed), "status": self.status,
                "changes": self.changes}

    def call(self, name: str, args: dict[str, Any]) -> str:
        """Run a tool by name; surface any error as a readable observation, never a raise."""
        tool = self.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            available = ", ".join(self.tools) or "none"
            return f"ERROR: unknown tool {name!r}; available tools: {available}"
        try:
            result = tool.run(**bind_args(name, tool.input_schema, args))
        except ToolError as exc:
            return exc.observation()
        except Exception as exc:
            log.debug("tool %s raised", name, exc_info=True)
            return f"ERROR: {name} failed: {type(exc).__name__}: {exc}"
        return clip_text(result if isinstance(result, str) else str(result))
