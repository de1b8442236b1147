"""A language server that misbehaves on purpose, for the diagnostics' bad-input tests.

Run as ``python lsp_server.py MODE``. It speaks real LSP (Content-Length framing,
JSON-RPC) on stdin/stdout. MODE:

- ``ok``: answers initialize, publishes one warning per line holding ``BAD`` for every
  opened or changed document (with its version);
- ``crash``: exits with code 3 as soon as it reads its first message;
- ``hang``: reads everything and never answers;
- ``flood``: answers initialize, then writes notifications without end;
- ``garbage``: answers initialize with a body that is not JSON;
- ``crash-later``: like ``ok``, but exits on the first document it is sent.
"""

from __future__ import annotations

import json
import sys


def read_message() -> dict | None:
    length = 0
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    return json.loads(sys.stdin.buffer.read(length))


def send(message: dict) -> None:
    body = json.dumps(message).encode()
    sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    sys.stdout.buffer.flush()


def publish(uri: str, version: int, text: str) -> None:
    found = [{"range": {"start": {"line": n, "character": line.index("BAD")},
                        "end": {"line": n, "character": line.index("BAD") + 3}},
              "severity": 2, "code": "bad-word", "source": "fake", "message": "BAD is bad"}
             for n, line in enumerate(text.splitlines()) if "BAD" in line]
    send({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics",
          "params": {"uri": uri, "version": version, "diagnostics": found}})


def main(mode: str) -> int:
    texts: dict[str, str] = {}
    while True:
        message = read_message()
        if message is None:
            return 0
        if mode == "crash":
            return 3
        if mode == "hang":
            continue
        method = message.get("method")
        if method == "initialize":
            if mode == "garbage":
                sys.stdout.buffer.write(b"Content-Length: 9\r\n\r\nnot json!")
                sys.stdout.buffer.flush()
                continue
            send({"jsonrpc": "2.0", "id": message["id"],
                  "result": {"capabilities": {"textDocumentSync": 1}}})
            if mode == "flood":
                while True:
                    send({"jsonrpc": "2.0", "method": "window/logMessage",
                          "params": {"type": 4, "message": "x" * 100}})
        elif method == "shutdown":
            send({"jsonrpc": "2.0", "id": message["id"], "result": None})
        elif method == "exit":
            return 0
        elif method in ("textDocument/didOpen", "textDocument/didChange"):
            if mode == "crash-later":
                return 4
            params = message["params"]
            doc = params["textDocument"]
            text = doc["text"] if method.endswith("didOpen") else \
                params["contentChanges"][-1]["text"]
            texts[doc["uri"]] = text
            publish(doc["uri"], doc["version"], text)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
