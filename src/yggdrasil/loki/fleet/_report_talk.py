"""A task's transcript as a conversation to read: the task, each step's thought and tool
call, what the tool said back, and the answer, within a budget of characters.

The transcript is the run's JSONL log (``start``, ``turn``, ``step``, ``end`` records,
see ``loop/_transcript``). Its path comes from a result line, so it is checked to stay
inside the output folder; only as much of the file is read as the budget can show, and
each message is cut to a share of it (a cut says so, and where the whole transcript is).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Message", "Talk", "read_talk"]

MESSAGE_CHARS = 6_000  # the most of one message shown, whatever the budget
_READ_FACTOR = 4  # bytes read per character of budget (JSON escapes, records not shown)


@dataclass
class Message:
    """One bubble: ``role`` is task, assistant, tool, note or answer."""

    role: str
    title: str
    text: str
    call: str = ""  # the tool call an assistant message makes, as ``name {args}``
    cut: int = 0  # characters left out
    checkpoint: str = ""  # a tool's answer: the checkpoint taken right after the call
    failed: bool = False  # a tool's answer that was an error or a refusal


@dataclass
class Talk:
    messages: list[Message] = field(default_factory=list)
    missing: str = ""  # why there is no transcript to show
    more: bool = False  # the budget ran out before the transcript did
    path: str = ""


def read_talk(out: Path, relative: str, task_id: str, budget: int) -> Talk:
    """The conversation of the transcript ``relative`` to ``out`` (or ``<id>/transcript.jsonl``)."""
    path = _inside(out, relative or f"{task_id}/transcript.jsonl")
    talk = Talk(path=relative or f"{task_id}/transcript.jsonl")
    if path is None:
        talk.missing = "no transcript recorded" if not relative else \
            "the transcript named by the result is not a file inside the output folder"
        return talk
    try:
        with open(path, "rb") as handle:
            data = handle.read(budget * _READ_FACTOR + 65_536)
            whole = not handle.read(1)
    except OSError as exc:
        talk.missing = f"the transcript cannot be read: {exc.strerror or exc}"
        return talk
    lines = data.splitlines()
    if not whole and lines:
        lines.pop()  # a cut line
    left = budget
    for raw in lines:
        for message in _messages(raw):
            _fit(message, min(MESSAGE_CHARS, max(left, 0)))
            talk.messages.append(message)
            left -= len(message.text) + len(message.call)
        if left <= 0:
            break
    talk.more = left <= 0 or not whole
    return talk


def _inside(out: Path, relative: str) -> Path | None:
    """``out/relative`` when it is a regular file inside ``out`` (links resolved)."""
    if not relative or "\0" in relative or os.path.isabs(relative):
        return None
    try:
        base = out.resolve(strict=True)
        path = (base / relative).resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if not path.is_relative_to(base) or not path.is_file():
        return None
    return path


def _messages(raw: bytes) -> list[Message]:
    try:
        record: Any = json.loads(raw)
    except (ValueError, RecursionError):
        return [Message("note", "unreadable line", raw.decode("utf-8", "replace"))]
    if not isinstance(record, dict):
        return []
    kind = record.get("type")
    if kind == "start":
        steps = record.get("max_steps")
        title = f"task (at most {steps} steps)" if type(steps) is int else "task"
        return [Message("task", title, _str(record.get("task")))]
    if kind == "step":
        return _step(record)
    if kind == "end":
        return [_end(record)]
    return []  # turns: the model's raw replies, shown through the steps they made


def _step(record: dict[str, Any]) -> list[Message]:
    n, tool = _str(record.get("n")), _str(record.get("tool"))
    thought, seen = _str(record.get("thought")), _str(record.get("observation"))
    if not tool:  # a reply that was not a decision, and the loop's correction
        return [Message("assistant", f"step {n}: not a decision", thought),
                Message("note", "the loop asked again", seen)]
    args = record.get("args")
    call = f"{tool} {json.dumps(args, ensure_ascii=False, default=str)}" if args else tool
    checkpoint = record.get("checkpoint")
    return [Message("assistant", f"step {n}", thought, call=call),
            Message("tool", _said(tool, record), seen,
                    failed=bool(record.get("is_error") or record.get("refused")),
                    checkpoint=str(checkpoint) if type(checkpoint) is int else "")]


def _said(tool: str, record: dict[str, Any]) -> str:
    """The title of a tool's answer, from its typed result: a command's exit, an error's
    category, a refusal."""
    data = record.get("data")
    data = data if isinstance(data, dict) else {}
    kind = data.get("kind")
    if kind == "command":
        code = data.get("exit_code")
        how = (f"exit {code}" if type(code) is int else
               "timed out" if data.get("timed_out") else "cancelled")
        return f"{tool} said ({how})"
    if kind == "error":
        return f"{tool} failed ({_str(data.get('category'))})"
    if kind == "refused":
        return f"{tool} was refused"
    return f"{tool} said"


def _end(record: dict[str, Any]) -> Message:
    why = _str(record.get("stop_reason"))
    text = _str(record.get("answer"))
    if record.get("error"):
        text = f"{text}\n\nerror: {_str(record.get('error'))}".strip()
    return Message("answer", f"end ({why})" if why else "end", text)


def _fit(message: Message, limit: int) -> None:
    """Cut the message's text and call to ``limit`` characters in all (the call to half)."""
    total = len(message.text) + len(message.call)
    if total <= limit:
        return
    message.call = message.call[:limit // 2]
    message.text = message.text[:limit - len(message.call)]
    message.cut = total - len(message.text) - len(message.call)


def _str(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else \
        json.dumps(value, ensure_ascii=False, default=str)
