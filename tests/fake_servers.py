"""A real HTTP server on 127.0.0.1 that speaks a model API's wire format, scripted per test.

The only fake in the engine tests, at the network edge: the official SDKs talk to it
exactly as they would to OpenAI, Anthropic or Ollama. Each test queues replies (a JSON
body with a status and headers, a hang, or a dropped connection) and afterwards reads
the requests the server received.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import BaseServer
from typing import Any, TypeVar

import pytest

HANG_LIMIT = 30.0  # seconds a hanging reply waits at most, so no thread outlives a test


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    action: str = "respond"  # or "hang" (never answers) or "drop" (closes the connection)


HANG = Reply(action="hang")
DROP = Reply(action="drop")


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeModelServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.replies: deque[Reply] = deque()
        self.requests: list[Request] = []
        self.ollama_models: list[str] | None = None
        self.released = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def queue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def posts(self) -> list[Any]:
        """The JSON bodies of the model requests, in order."""
        return [r.body for r in self.requests if r.method == "POST"]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeModelServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._record(None)
        models = self.server.ollama_models
        if self.path.rstrip("/") == "/api/tags" and models is not None:
            self._send(Reply(body={"models": [{"name": m, "model": m} for m in models]}))
        else:
            self._send(Reply(404, {"error": "not found"}))

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        self._record(json.loads(raw) if raw else None)
        if not self.server.replies:
            self._send(Reply(400, {"error": {"message": "fake server: no scripted reply left",
                                             "type": "invalid_request_error"}}))
            return
        reply = self.server.replies.popleft()
        if reply.action == "hang":
            self.server.released.wait(HANG_LIMIT)
        if reply.action in ("hang", "drop"):
            self.close_connection = True
            return
        self._send(reply)

    def _record(self, body: Any) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.server.requests.append(Request(self.command, self.path, headers, body))

    def _send(self, reply: Reply) -> None:
        body = reply.body if isinstance(reply.body, bytes | str) else json.dumps(reply.body)
        data = body.encode() if isinstance(body, str) else body
        self.send_response(reply.status)
        content_type = "application/json" if not isinstance(reply.body, str) else "text/plain"
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


S = TypeVar("S", bound=BaseServer)


@contextmanager
def served(server: S, before_stop: Callable[[], object] = lambda: None) -> Iterator[S]:
    """``server`` answering from a thread of its own while the block runs; then
    ``before_stop`` (e.g. let held requests go), shut down, closed, its thread joined."""
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        before_stop()
        server.shutdown()
        server.server_close()
        thread.join()


@contextmanager
def serve() -> Iterator[FakeModelServer]:
    server = FakeModelServer()
    with served(server, server.released.set):
        yield server


ENGINE_ENV = ("LOKI_ENGINE", "LOKI_MODEL", "LOKI_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL",
              "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OLLAMA_HOST")


def clear_engine_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No key, URL or engine choice from the machine leaks into a test."""
    for name in ENGINE_ENV:
        monkeypatch.delenv(name, raising=False)


# --- the OpenAI chat-completions wire format ---------------------------------------

def openai_reply(text: str | None = None, calls: list[tuple[str, Any]] | None = None, *,
                 finish_reason: str | None = None, usage: tuple[int, int] = (10, 5),
                 id_prefix: str = "call_") -> Reply:
    """A chat completion; ``calls`` are (name, args), args a dict or a raw string; their ids
    are ``<id_prefix><n>`` (a run over several replies needs a prefix per reply)."""
    tool_calls = [{"id": f"{id_prefix}{i}", "type": "function",
                   "function": {"name": name,
                                "arguments": args if isinstance(args, str) else json.dumps(args)}}
                  for i, (name, args) in enumerate(calls or [])]
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = tool_calls
    reason = finish_reason or ("tool_calls" if tool_calls else "stop")
    return Reply(body={
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": "gpt-fake",
        "choices": [{"index": 0, "message": message, "finish_reason": reason}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                  "total_tokens": sum(usage)}})


def openai_error(status: int, message: str, *, code: str | None = None,
                 headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, {"error": {"message": message, "type": "invalid_request_error",
                                    "param": None, "code": code}}, headers or {})


# --- the Anthropic messages wire format ----------------------------------------------

def anthropic_reply(text: str | None = None, calls: list[tuple[str, Any]] | None = None, *,
                    stop_reason: str | None = None, usage: tuple[int, int] = (10, 5)) -> Reply:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": args}
                for i, (name, args) in enumerate(calls or [])]
    reason = stop_reason or ("tool_use" if calls else "end_turn")
    return Reply(body={
        "id": "msg_fake", "type": "message", "role": "assistant", "model": "claude-fake",
        "content": content, "stop_reason": reason, "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]}})


def anthropic_error(status: int, kind: str, message: str,
                    headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, {"type": "error", "error": {"type": kind, "message": message}},
                 headers or {})


# --- the Gemini generateContent wire format ------------------------------------------

def gemini_reply(text: str | None = None, calls: list[tuple[str, Any]] | None = None) -> Reply:
    """A generateContent response: text or functionCall parts."""
    parts: list[dict[str, Any]] = [{"text": text}] if text else []
    parts += [{"functionCall": {"name": name, "args": args}} for name, args in calls or []]
    return Reply(body={
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP",
                        "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5,
                          "totalTokenCount": 15}, "modelVersion": "gemini-fake"})


# --- pictures in requests, as the providers document them -----------------------------

_IMAGE_TYPES = {"image/jpeg", "image/png", "image/gif", "image/webp"}


def anthropic_image_problems(body: dict[str, Any]) -> list[str]:
    """Where a Messages API request breaks the documented shape of images: an image block
    is ``{"type": "image", "source": {"type": "base64", "media_type", "data"}}`` in a user
    turn, or inside a tool_result's content list beside text blocks."""
    problems: list[str] = []

    def image(block: dict[str, Any], where: str) -> None:
        source = block.get("source", {})
        if set(block) != {"type", "source"} or source.get("type") != "base64":
            problems.append(f"{where}: not a base64 image block")
        elif source.get("media_type") not in _IMAGE_TYPES or not source.get("data"):
            problems.append(f"{where}: media_type {source.get('media_type')!r} or no data")

    for n, message in enumerate(body["messages"]):
        for b, block in enumerate(message["content"] if isinstance(message["content"], list)
                                  else []):
            where = f"messages[{n}].content[{b}]"
            if block["type"] == "image":
                if message["role"] != "user":
                    problems.append(f"{where}: an image in a {message['role']} turn")
                image(block, where)
            if block["type"] == "tool_result" and isinstance(block["content"], list):
                for i, inner in enumerate(block["content"]):
                    if inner["type"] == "image":
                        image(inner, f"{where}.content[{i}]")
                    elif inner["type"] != "text":
                        problems.append(f"{where}.content[{i}]: a {inner['type']} block")
    return problems


def openai_image_problems(body: dict[str, Any]) -> list[str]:
    """Where a Chat Completions request breaks the documented shape: image parts
    (``{"type": "image_url", "image_url": {"url": "data:<mime>;base64,..."}}``) only in
    user messages; a tool message's content is text; the tool messages answering an
    assistant's tool_calls follow it unbroken, one for each call."""
    problems: list[str] = []
    messages = body["messages"]
    for n, message in enumerate(messages):
        content = message.get("content")
        if message["role"] == "tool" and not isinstance(content, str):
            problems.append(f"messages[{n}]: a tool message whose content is not text")
        for p, part in enumerate(content if isinstance(content, list) else []):
            if part["type"] == "image_url":
                url = part.get("image_url", {}).get("url", "")
                mime = url[5:].split(";", 1)[0] if url.startswith("data:") else ""
                if message["role"] != "user" or mime not in _IMAGE_TYPES or ";base64," not in url:
                    problems.append(f"messages[{n}].content[{p}]: not a user's data-URL image")
        if message["role"] == "assistant" and message.get("tool_calls"):
            wanted = [c["id"] for c in message["tool_calls"]]
            after = [m.get("tool_call_id") for m in messages[n + 1:n + 1 + len(wanted)]]
            if after != wanted:
                problems.append(f"messages[{n}]: its tool calls are answered by {after}")
    return problems
