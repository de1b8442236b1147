"""One running language server, spoken to in LSP: start, open a file, ask what is wrong.

The messages are ``lsprotocol``'s types (the protocol's own Python types, generated from
its metamodel), turned into JSON by its converter; the framing is ``_wire``'s. A file's
findings are got the most exact way the server offers:

- ``pull``: the server declares ``diagnosticProvider`` (LSP 3.17): the document is
  synced and ``textDocument/diagnostic`` answers for exactly that text (basedpyright,
  pyright, rust-analyzer);
- ``tsserver``: typescript-language-server has no pull, but passes tsserver's own
  synchronous requests through (``typescript.tsserverRequest``: syntactic and semantic
  diagnostics of the file as synced);
- ``push``: ``textDocument/publishDiagnostics`` after the sync: the one for the synced
  version when the server says versions, else the last one once the server has been
  quiet a moment.

Everything the server sends is untrusted: a crash, a hang (a request not answered in
time), a flood or a message over the limits ends the server (``ServerFailed`` says which,
as a phrase); the pool starts another later.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..results import Diagnostic
from ..sandbox import Capture, Process
from ._servers import ServerSpec
from ._wire import Frames, encode

__all__ = ["LanguageClient", "ServerFailed", "Start"]

log = logging.getLogger("yggdrasil.loki.diagnostics")

# start(argv, stdout sink, stderr sink) -> the server's process, fenced by the caller
Start = Callable[[list[str], Frames, Capture], Process]
_POLL = 0.05  # seconds between looks at whether the server still runs while waiting
_QUIET = 0.35  # seconds without a publish that end a push wait for an unversioned server
_WRITE_WAIT = 5.0  # seconds a message may wait for room in the server's stdin
_SEVERITY = {1: "error", 2: "warning", 3: "info", 4: "hint"}
_TS_SEVERITY = {"error": 1, "warning": 2, "message": 3, "suggestion": 4}  # tsserver categories


class ServerFailed(Exception):
    """The server crashed, hung, flooded or broke the protocol; ``str()`` says which."""


@dataclass
class _Doc:
    version: int
    text: str
    sent: float  # when the last sync was sent (monotonic)


@dataclass
class _Published:
    version: int | None
    at: float
    items: list[dict[str, Any]] = field(default_factory=list)


class LanguageClient:
    """A started server and the documents it has open (see the module docstring)."""

    def __init__(self, spec: ServerSpec, root: Path, start: Start) -> None:
        self.spec, self.root = spec, root
        self._start = start
        self._ids = itertools.count(1)
        self._lock = threading.Condition()
        self._answers: dict[int, dict[str, Any]] = {}
        self._published: dict[str, _Published] = {}
        self._docs: dict[str, _Doc] = {}
        self.fault = ""
        self.versioned = False
        self.mode = "push"
        self.stderr = Capture(2048, 2048)
        self.process: Process | None = None
        self.started = 0.0

    # -- lifetime ------------------------------------------------------------------------

    def start(self, timeout: float) -> None:
        """Start the server and initialize it; ServerFailed when it cannot."""
        from lsprotocol import types as lsp

        frames = Frames(self._on_message, self._on_fault)
        try:
            self.process = self._start(list(self.spec.command), frames, self.stderr)
        except Exception as exc:  # a fence that refuses, a program gone since it was found
            raise ServerFailed(f"it could not start ({exc})") from None
        self.started = time.monotonic()
        uri = self.root.as_uri()
        params = lsp.InitializeParams(
            # no process id: in the fence's PID namespace ours does not exist, and a server
            # that watches it (pyright, tsserver) would take us for dead and exit
            process_id=None, root_uri=uri, root_path=str(self.root),
            capabilities=_capabilities(lsp),
            workspace_folders=[lsp.WorkspaceFolder(uri=uri, name=self.root.name or "root")],
            initialization_options=dict(self.spec.init) or None,
            client_info=lsp.ClientInfo(name="yggdrasil-loki"))
        answer = self.request("initialize", _plain(params), timeout)
        capabilities = answer.get("capabilities", {}) if isinstance(answer, dict) else {}
        if capabilities.get("diagnosticProvider"):
            self.mode = "pull"
        elif self.spec.name == "typescript" or "typescript-language-server" in \
                self.spec.command[0]:
            self.mode = "tsserver"
        self.notify("initialized", {})
        if self.spec.settings:
            self.notify("workspace/didChangeConfiguration",
                        {"settings": self.spec.setting(None)})

    @property
    def alive(self) -> bool:
        return (not self.fault and self.process is not None
                and self.process.popen.poll() is None)

    def close(self) -> None:
        """Ask the server to shut down (briefly), then end it with all it started."""
        process, self.process = self.process, None
        if process is None:
            return
        if not self.fault and process.popen.poll() is None:
            try:
                self.request("shutdown", None, 1.0, process=process)
                self._send({"jsonrpc": "2.0", "method": "exit"}, process)
            except ServerFailed:
                pass
        try:
            process.finish(stop=process.popen.poll() is None)
        except Exception:  # pragma: no cover - a kill that failed leaves nothing to do
            log.debug("stopping %s failed", self.spec.name, exc_info=True)
        with self._lock:
            self._lock.notify_all()

    # -- JSON-RPC ------------------------------------------------------------------------

    def request(self, method: str, params: Any, timeout: float, *,
                process: Process | None = None) -> Any:
        """The server's answer to ``method``; ServerFailed when it errs, dies or does not
        answer within ``timeout`` seconds."""
        n = next(self._ids)
        self._send({"jsonrpc": "2.0", "id": n, "method": method, "params": params}, process)
        deadline = time.monotonic() + timeout
        with self._lock:
            while n not in self._answers:
                self._check(process)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ServerFailed(f"it did not answer {method} within {timeout:g}s")
                self._lock.wait(min(left, _POLL))
            answer = self._answers.pop(n)
        if "error" in answer:
            error = answer["error"] if isinstance(answer["error"], dict) else {}
            raise ServerFailed(f"it answered {method} with an error: "
                               f"{str(error.get('message', '?'))[:200]}")
        return answer.get("result")

    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def _send(self, message: dict[str, Any], process: Process | None = None) -> None:
        process = process or self.process
        if process is None:
            raise ServerFailed(self.fault or "it is not running")
        data = encode(message)
        try:
            sent = process.write_input(data, _WRITE_WAIT)
        except (BrokenPipeError, OSError):
            raise ServerFailed(self._gone_reason(process)) from None
        if sent < len(data):
            raise ServerFailed(f"it stopped reading its input for {_WRITE_WAIT:g}s")

    def _check(self, process: Process | None = None) -> None:
        """Raise when the server broke the protocol or ended (the lock held)."""
        if self.fault:
            raise ServerFailed(self.fault)
        process = process or self.process
        if process is None or process.popen.poll() is not None:
            raise ServerFailed(self._gone_reason(process))

    def _gone_reason(self, process: Process | None) -> str:
        if self.fault:
            return self.fault
        code = process.popen.poll() if process is not None else None
        said = self.stderr.decoded()[1].strip().splitlines()[-1:] or [""]
        tail = f": {said[0][:200]}" if said[0] else ""
        return (f"it exited (code {code}){tail}" if code is not None else "it is not running")

    def _on_fault(self, why: str) -> None:
        with self._lock:
            self.fault = why
            self._lock.notify_all()
        process = self.process
        if process is not None:  # a flood or a broken message: no point in reading on
            threading.Thread(target=lambda: process.finish(stop=True), daemon=True).start()

    def _on_message(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message:
            self._answer_request(message)
        elif "id" in message:
            ident = message.get("id")
            if isinstance(ident, int):
                with self._lock:
                    self._answers[ident] = message
                    self._lock.notify_all()
        elif message.get("method") == "textDocument/publishDiagnostics":
            params = message.get("params") or {}
            if isinstance(params, dict) and isinstance(params.get("uri"), str):
                version = params.get("version")
                items = params.get("diagnostics")
                with self._lock:
                    self.versioned |= isinstance(version, int)
                    self._published[params["uri"]] = _Published(
                        version if isinstance(version, int) else None, time.monotonic(),
                        items if isinstance(items, list) else [])
                    self._lock.notify_all()

    def _answer_request(self, message: dict[str, Any]) -> None:
        """What the server asks the client: its settings, a progress token, a
        registration; anything else is 'method not found'."""
        method, params = message.get("method"), message.get("params") or {}
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message.get("id")}
        if method == "workspace/configuration":
            items = params.get("items", []) if isinstance(params, dict) else []
            reply["result"] = [self.spec.setting(i.get("section") if isinstance(i, dict)
                                                 else None) for i in items]
        elif method == "workspace/workspaceFolders":
            reply["result"] = [{"uri": self.root.as_uri(), "name": self.root.name or "root"}]
        elif method in ("window/workDoneProgress/create", "client/registerCapability",
                        "client/unregisterCapability", "window/showMessageRequest",
                        "workspace/diagnostic/refresh", "workspace/semanticTokens/refresh",
                        "workspace/inlayHint/refresh", "workspace/codeLens/refresh"):
            reply["result"] = None
        else:
            reply["error"] = {"code": -32601, "message": f"{method} is not supported"}
        with contextlib.suppress(ServerFailed):
            self._send(reply)

    # -- documents -----------------------------------------------------------------------

    def diagnose(self, rel: str, text: str, timeout: float) -> list[Diagnostic]:
        """The server's findings for the file ``rel`` holding ``text`` (synced first);
        ServerFailed when it fails or does not answer within ``timeout``."""
        uri = (self.root / rel).as_uri()
        language = self.spec.language_of(rel) or "plaintext"
        deadline = time.monotonic() + timeout
        version = self._sync(uri, language, text)
        if self.mode == "pull":
            items = self._pull(uri, deadline)
        elif self.mode == "tsserver":
            items = self._tsserver(uri, deadline)
        else:
            items = self._pushed(uri, version, deadline)
        return [d for d in (_diagnostic(item, rel, text, self.spec.name) for item in items)
                if d is not None]

    def forget(self, rel: str) -> None:
        """Close the file in the server (it was deleted, or too many are open)."""
        uri = (self.root / rel).as_uri()
        if self._docs.pop(uri, None) is not None:
            self.notify("textDocument/didClose", {"textDocument": {"uri": uri}})

    @property
    def open_files(self) -> int:
        return len(self._docs)

    def _sync(self, uri: str, language: str, text: str) -> int:
        doc = self._docs.get(uri)
        now = time.monotonic()
        if doc is None:
            self._docs[uri] = _Doc(1, text, now)
            self.notify("textDocument/didOpen", {"textDocument": {
                "uri": uri, "languageId": language, "version": 1, "text": text}})
            return 1
        if doc.text == text:
            return doc.version
        doc.version, doc.text, doc.sent = doc.version + 1, text, now
        self.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": doc.version},
            "contentChanges": [{"text": text}]})
        return doc.version

    def _pull(self, uri: str, deadline: float) -> list[dict[str, Any]]:
        left = max(0.01, deadline - time.monotonic())
        report = self.request("textDocument/diagnostic", {"textDocument": {"uri": uri}}, left)
        items = report.get("items") if isinstance(report, dict) else None
        return items if isinstance(items, list) else []

    def _tsserver(self, uri: str, deadline: float) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for command in ("syntacticDiagnosticsSync", "semanticDiagnosticsSync"):
            left = max(0.01, deadline - time.monotonic())
            found = self.request("workspace/executeCommand", {
                "command": "typescript.tsserverRequest",
                "arguments": [command, {"file": uri, "includeLinePosition": False}]}, left)
            body = found.get("body") if isinstance(found, dict) else found
            items += [_from_tsserver(d) for d in body or [] if isinstance(d, dict)]
        return items

    def _pushed(self, uri: str, version: int, deadline: float) -> list[dict[str, Any]]:
        sent = self._docs[uri].sent
        with self._lock:
            while True:
                self._check()
                got = self._published.get(uri)
                now = time.monotonic()
                if got is not None and self.versioned and got.version == version:
                    return got.items
                if got is not None and not self.versioned and got.at >= sent \
                        and now - got.at >= _QUIET:
                    return got.items
                if now >= deadline:
                    raise ServerFailed("it published no diagnostics for the file in time")
                self._lock.wait(min(deadline - now, _POLL))


def _plain(value: Any) -> Any:
    from lsprotocol.converters import get_converter

    return get_converter().unstructure(value)


def _capabilities(lsp: Any) -> Any:
    return lsp.ClientCapabilities(
        text_document=lsp.TextDocumentClientCapabilities(
            synchronization=lsp.TextDocumentSyncClientCapabilities(did_save=False),
            publish_diagnostics=lsp.PublishDiagnosticsClientCapabilities(
                version_support=True, related_information=False),
            diagnostic=lsp.DiagnosticClientCapabilities(related_document_support=False)),
        workspace=lsp.WorkspaceClientCapabilities(
            configuration=True, workspace_folders=True,
            did_change_configuration=lsp.DidChangeConfigurationClientCapabilities()),
        window=lsp.WindowClientCapabilities(work_done_progress=False),
        general=lsp.GeneralClientCapabilities(position_encodings=["utf-16"]))


def _from_tsserver(d: dict[str, Any]) -> dict[str, Any]:
    """A tsserver diagnostic (1-based line/offset, category) as an LSP one."""
    start, end = d.get("start") or {}, d.get("end") or {}
    return {"range": {"start": {"line": int(start.get("line", 1)) - 1,
                                "character": int(start.get("offset", 1)) - 1},
                      "end": {"line": int(end.get("line", 1)) - 1,
                              "character": int(end.get("offset", 1)) - 1}},
            "message": d.get("text", ""), "code": d.get("code"), "source": "typescript",
            "severity": _TS_SEVERITY.get(str(d.get("category")), 1)}


def _diagnostic(item: Any, rel: str, text: str, server: str) -> Diagnostic | None:
    """An LSP diagnostic as ours; None for a hint or for something malformed."""
    if not isinstance(item, dict):
        return None
    severity = _SEVERITY.get(item.get("severity") or 1)
    if severity is None or severity == "hint":
        return None
    try:
        start, end = item["range"]["start"], item["range"]["end"]
        line, character = int(start["line"]) + 1, int(start["character"])
        end_line, end_character = int(end["line"]) + 1, int(end["character"])
    except (KeyError, TypeError, ValueError):
        return None
    lines = text.splitlines()
    source_line = lines[line - 1] if 0 < line <= len(lines) else ""
    column = _column(source_line, character)
    symbol = ""
    if end_line == line:
        symbol = source_line[column - 1 : _column(source_line, end_character) - 1][:200]
    code = item.get("code")
    source = str(item.get("source") or server)
    if source == "typescript" and isinstance(code, int):
        code = f"TS{code}"
    return Diagnostic(path=rel, line=line, column=column, severity=severity,
                      code="" if code is None else str(code)[:100],
                      message=str(item.get("message", ""))[:2000], source=source[:50],
                      symbol=symbol)


def _column(line: str, utf16: int) -> int:
    """The 1-based column (in characters) of a UTF-16 offset into ``line``."""
    if line.isascii():
        return min(utf16, len(line)) + 1
    units = 0
    for i, ch in enumerate(line):
        if units >= utf16:
            return i + 1
        units += 2 if ord(ch) > 0xFFFF else 1
    return len(line) + 1
