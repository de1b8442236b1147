"""Tools from other MCP servers: a client of each, its tools added to a toolbox.

``McpServer`` says how to reach one (a command spoken to over stdio, or a streamable
HTTP URL); ``connect`` starts a session with it on an event loop of its own (a thread:
the toolbox is synchronous) and returns its tools as ``Tool``s named
``<server>__<tool>``, with the server's own JSON Schemas. Works with the official ``mcp``
SDK 1.x and 2.x (extra ``mcp``), imported only here and only when used.

These tools run outside loki's fence: the server is a program of the user's, not a
command in the sandbox, so each says so in its description and is ``open_world``. What
does apply is the toolbox's gate (the command rules, by tool name) and its hooks. A
server that dies, hangs or answers garbage gives ERROR observations; the session (and a
stdio server's process) ends with the toolbox.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import re
import shlex
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass, field
from typing import Any

from ..errors import ToolDefinitionError, ToolError
from ..results import ErrorResult, RemoteResult, clip_text, remote_error
from ..sandbox import current_cancel
from ._flavors import FLAVORS, reshape
from ._tool import Tool

__all__ = ["McpConnection", "McpServer", "connect"]

_CHECK = 0.05  # seconds between looks at a call's cancel event
_START = 60.0  # seconds a server has to answer initialize and tools/list
MAX_NAME = 64  # characters of a tool name (OpenAI's limit)
MAX_DESCRIPTION = 2_000  # characters of a tool's description, which rides in every request
MAX_TOOLS = 256  # tools taken from one server (a model cannot use a thousand anyway)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class McpServer:
    """How to reach one MCP server: ``command`` + ``args`` (+ ``env``, ``cwd``) spoken to
    over stdio, or ``url`` (+ ``headers``) over streamable HTTP. ``name`` prefixes its
    tools (``<name>__<tool>``); ``timeout`` is the seconds one call may take.

    ``env`` is what the server's process gets on top of the SDK's safe default (HOME,
    PATH, USER...): the user's secrets are not passed on unless named here.
    """

    name: str
    command: str | None = None
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] | None = None
    timeout: float = 120.0

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name) or "__" in self.name:
            raise ValueError(f"MCP server name {self.name!r}: use letters, digits and single "
                             "underscores (it prefixes the tool names: <name>__<tool>)")
        if (self.command is None) == (self.url is None):
            raise ValueError(f"MCP server {self.name!r}: give a command (stdio) or a url "
                             "(streamable HTTP), not both or neither")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"MCP server {self.name!r}: url must be http:// or https://, "
                             f"got {self.url!r}")
        if self.timeout <= 0:
            raise ValueError(f"MCP server {self.name!r}: timeout must be positive")

    @classmethod
    def parse(cls, text: str) -> McpServer:
        """``name=command args...`` (stdio) or ``name=http(s)://...`` (streamable HTTP)."""
        name, sep, rest = text.partition("=")
        if not sep or not rest.strip():
            raise ValueError(f"--mcp {text!r}: write NAME=COMMAND ARGS or NAME=URL, e.g. "
                             "--mcp 'db=uvx mcp-server-sqlite --db-path x.db' or "
                             "--mcp docs=http://127.0.0.1:8000/mcp")
        rest = rest.strip()
        if rest.startswith(("http://", "https://")):
            return cls(name.strip(), url=rest)
        words = shlex.split(rest)
        return cls(name.strip(), command=words[0], args=tuple(words[1:]))

    def describe(self) -> str:
        return self.url or shlex.join([self.command or "", *self.args])


@dataclass
class McpConnection:
    """A live session with one server, on an event loop in a thread of its own."""

    server: McpServer
    tools: list[Any] = field(default_factory=list)  # the server's tools, as it listed them
    dead: str = ""  # why the session ended, once it has
    _portal_cm: AbstractContextManager[Any] | None = field(default=None, repr=False)
    _portal: Any = field(default=None, repr=False)
    _session: Any = field(default=None, repr=False)
    _stop: Any = field(default=None, repr=False)
    _task: concurrent.futures.Future[Any] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def open(self) -> McpConnection:
        import anyio.from_thread

        self._portal_cm = anyio.from_thread.start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        try:
            self._task, _ = self._portal.start_task(self._hold)
        except BaseException as exc:
            self.close()
            raise ToolDefinitionError(
                f"cannot start the MCP server {self.server.name!r} "
                f"({self.server.describe()}): {_reason(exc)}") from None
        return self

    async def _hold(self, task_status: Any) -> None:
        """Open the transport and session, list the tools, then hold them until closed."""
        import anyio
        from mcp.client.session import ClientSession

        self._stop = anyio.Event()
        try:
            async with _transport(self.server) as (read, write), \
                    ClientSession(read, write) as session:
                with anyio.fail_after(_START):
                    await session.initialize()
                    self.tools = await _list_tools(session)
                self._session = session
                task_status.started()
                await self._stop.wait()
        except BaseException as exc:
            self.dead = _reason(exc)
            raise
        finally:
            self.dead = self.dead or "the session was closed"
            self._session = None

    def call(self, name: str, args: Mapping[str, Any]) -> RemoteResult | ErrorResult:
        """The server's answer to ``tools/call``, as data."""
        if self._session is None or self._portal is None:
            raise ToolError(f"the MCP server {self.server.name!r} is not running "
                            f"({self.dead or 'not started'}); its tools cannot be called")
        try:
            future = self._portal.start_task_soon(self._call, name, dict(args))
        except RuntimeError as exc:  # the portal stopped meanwhile
            raise ToolError(f"the MCP server {self.server.name!r} is closed: {exc}") from None
        cancel = current_cancel()
        while True:
            try:
                result = future.result(timeout=_CHECK)
                break
            except concurrent.futures.TimeoutError:
                if cancel is not None and cancel.is_set():
                    future.cancel()
                    raise ToolError(f"{self.server.name}__{name} was cancelled") from None
            except Exception as exc:
                raise ToolError(f"the MCP server {self.server.name!r} failed on {name}: "
                                f"{_reason(exc)}") from None
        return _result(self.server.name, name, result)

    async def _call(self, name: str, args: dict[str, Any]) -> Any:
        import anyio

        session = self._session
        if session is None:
            raise RuntimeError(f"the session ended ({self.dead})")
        with anyio.fail_after(self.server.timeout):
            return await session.call_tool(name, args)

    def close(self) -> None:
        """End the session (a stdio server's process with it) and the loop's thread."""
        with self._lock:
            portal, self._portal = self._portal, None
            cm, self._portal_cm = self._portal_cm, None
        if portal is None or cm is None:
            return
        if self._stop is not None:
            with suppress(Exception):  # the loop already ended
                portal.call(self._stop.set)
        if self._task is not None:
            concurrent.futures.wait([self._task], timeout=10)
        with suppress(BaseException):  # a server that died left its error on the held task
            cm.__exit__(None, None, None)


def _transport(server: McpServer) -> Any:
    """The SDK's client streams for ``server`` (1.x and 2.x spell HTTP differently)."""
    if server.command is not None:
        from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

        env = {**get_default_environment(), **(server.env or {})}
        return stdio_client(StdioServerParameters(command=server.command,
                                                  args=list(server.args), env=env,
                                                  cwd=server.cwd))
    return _http(server)


def _http(server: McpServer) -> Any:
    from contextlib import asynccontextmanager

    import mcp.client.streamable_http as sdk_http

    http: Any = sdk_http  # the 1.x and 2.x spellings are both used here
    url = str(server.url)

    @asynccontextmanager
    async def streams() -> Any:
        if hasattr(http, "streamable_http_client") and hasattr(http, "create_mcp_http_client"):
            client = http.create_mcp_http_client(headers=dict(server.headers or {}))
            async with client, http.streamable_http_client(url, http_client=client) as got:
                yield got[0], got[1]
        else:  # older 1.x
            async with http.streamablehttp_client(url,
                                                  headers=dict(server.headers or {})) as got:
                yield got[0], got[1]
    return streams()


async def _list_tools(session: Any) -> list[Any]:
    tools: list[Any] = []
    cursor = None
    while True:
        page = await (session.list_tools(cursor=cursor) if cursor else session.list_tools())
        tools += list(page.tools)
        cursor = getattr(page, "nextCursor", None) or getattr(page, "next_cursor", None)
        if not cursor or len(tools) >= MAX_TOOLS:
            return tools[:MAX_TOOLS]


def _field(obj: Any, snake: str) -> Any:
    """A field by its 2.x (snake_case) or 1.x (camelCase) name."""
    camel = snake.split("_")[0] + "".join(w.title() for w in snake.split("_")[1:])
    return getattr(obj, snake, None) if hasattr(obj, snake) else getattr(obj, camel, None)


def _result(server: str, name: str, result: Any) -> RemoteResult | ErrorResult:
    parts = []
    for item in _field(result, "content") or []:
        kind = getattr(item, "type", "")
        if kind == "text":
            parts.append(str(item.text))
        else:
            mime = _field(item, "mime_type") or ""
            parts.append(f"[{kind} content{' ' + mime if mime else ''}: not shown]")
    structured = _field(result, "structured_content")
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False))
    text = "\n".join(parts) or "(no content)"
    if _field(result, "is_error"):
        return remote_error(server, text)
    return RemoteResult(server=server, tool=name, text=text,
                        structured=structured if isinstance(structured, dict) else None)


def _reason(exc: BaseException) -> str:
    """A readable reason, looking inside exception groups (anyio task groups raise them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text != type(exc).__name__ else text


def connect(server: McpServer, gate: Callable[[str], None] | None) -> tuple[McpConnection,
                                                                            list[Tool]]:
    """A session with ``server`` and its tools; ``gate(tool_name)`` is asked before each
    call (it raises to refuse). ToolDefinitionError when the server cannot be reached."""
    connection = McpConnection(server).open()
    try:
        return connection, [_tool(connection, listed, gate) for listed in connection.tools]
    except BaseException:
        connection.close()
        raise


def _tool(connection: McpConnection, listed: Any, gate: Callable[[str], None] | None) -> Tool:
    server = connection.server
    remote = str(listed.name)
    name = _tool_name(server.name, remote)
    schema = _schema(_field(listed, "input_schema"))
    hints = _field(listed, "annotations")
    read_only = bool(_field(hints, "read_only_hint")) if hints is not None else False

    def run(**args: Any) -> RemoteResult | ErrorResult:
        if gate is not None:
            gate(name)
        return connection.call(remote, args)

    about = (clip_text(str(listed.description or remote).strip(), MAX_DESCRIPTION) +
             f"\n[from the MCP server {server.name!r}: runs outside loki's fence]")
    params = {k: str(v.get("description") or k) if isinstance(v, dict) else k
              for k, v in schema["properties"].items()}
    tool = Tool(name, about, params, run, mutates=not read_only, open_world=True,
                title=str(_field(listed, "title") or remote))
    tool.input_schema = schema
    return tool


_SUBSCHEMA = ("items", "not", "contains", "propertyNames", "if", "then", "else")
_SUBSCHEMAS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")


def _tool_name(server: str, remote: str) -> str:
    """``<server>__<tool>`` as an identifier vendors take (letters, digits, ``_``; at most
    64 characters: a longer one keeps its head and a hash of the whole)."""
    name = re.sub(r"\W", "_", f"{server}__{remote}", flags=re.ASCII)
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:MAX_NAME - 9]}_{digest}"


def _schema(given: Any) -> dict[str, Any]:
    """The server's input schema, with what ``bind_args`` and the vendor flavors read made
    sure of: an object with ``properties`` and ``required``, no boolean subschemas. One
    that a flavor still cannot reshape becomes an open object (the server checks it)."""
    schema = _plain(given) if isinstance(given, Mapping) else {}
    schema["type"] = "object"
    properties = schema.get("properties")
    schema["properties"] = dict(properties) if isinstance(properties, Mapping) else {}
    required = schema.get("required")
    schema["required"] = [r for r in required if r in schema["properties"]] if isinstance(
        required, list) else []
    try:
        for flavor in FLAVORS:
            reshape(schema, flavor)
    except Exception:
        return {"type": "object", "properties": {}, "required": [],
                "additionalProperties": True}
    return schema


def _plain(node: Any, depth: int = 0) -> Any:
    """A schema with ``true``/``false`` subschemas spelled as objects ({} / {"not": {}})."""
    if depth > 64:  # a server's schema nested without end
        return {}
    if isinstance(node, bool):
        return {} if node else {"not": {}}
    if not isinstance(node, Mapping):
        return {}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _SUBSCHEMA:
            out[key] = _plain(value, depth + 1)
        elif key in _SUBSCHEMAS and isinstance(value, list):
            out[key] = [_plain(v, depth + 1) for v in value]
        elif key in _SCHEMA_MAPS and isinstance(value, Mapping):
            out[key] = {k: _plain(v, depth + 1) for k, v in value.items()}
        else:
            out[key] = value
    return out
