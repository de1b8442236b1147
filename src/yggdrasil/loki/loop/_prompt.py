"""What the loop says to the model: the system prompt, observations and corrections."""

from __future__ import annotations

from ..toolbox import Toolbox

_INTRO = """You are Loki, an autonomous coding agent. You work inside one project folder, \
the root, and act only through the tools {where}. Paths are relative to the root."""

_TEXT_PROTOCOL = """Reply to every message with exactly one JSON object and nothing else.
To call a tool:
{"thought": "<one sentence: why this step>", "tool": "<tool name>", "args": {<arguments by name>}}
The tool's output comes back to you as the next message.
When the task is done, or cannot be done:
{"thought": "<why>", "done": true, "answer": "<your final answer for the user>"}"""

_NATIVE_PROTOCOL = """Call the tools to act; each result comes back to you. When the task \
is done, or cannot be done, reply without calling a tool: that reply is your final answer \
for the user."""

_METHOD = """Look before you change anything{edits}, and check your work when you can. \
You have at most {max_steps} tool calls; an output marked as elided was dropped to save \
room: call the tool again if you still need it."""
_EDITS = ", prefer small exact edits (edit_file) to rewriting whole files"

_DECISION_SHAPE = ('{"thought": "...", "tool": "<tool name>", "args": {...}} to call a tool, '
                   'or {"thought": "...", "done": true, "answer": "..."} when the task is done')


def system_prompt(toolbox: Toolbox, *, native: bool, max_steps: int,
                  instructions: str = "") -> str:
    """The system prompt. With native tool calling the tool schemas sent with each request
    are the catalog, so the prompt does not repeat it: it keeps only the toolbox status
    (the fence, protected files, running jobs); the text protocol carries the spec."""
    protocol = _NATIVE_PROTOCOL if native else _TEXT_PROTOCOL
    if native:
        parts = [_INTRO.format(where="you are given"),
                 *(["# The toolbox", toolbox.status] if toolbox.status else [])]
    else:
        parts = [_INTRO.format(where="below"), "# Tools", toolbox.spec()]
    parts += ["# How to act", protocol,
              _METHOD.format(max_steps=max_steps, edits=_EDITS if "edit_file" in toolbox else "")]
    if instructions:
        parts += ["# Instructions from the user and the project", instructions]
    return "\n\n".join(parts)


def task_message(task: str, repo_map: str = "") -> str:
    if not repo_map:
        return f"Task: {task}"
    return (f"Task: {task}\n\nA map of the repository, its most referenced definitions "
            f"(outline, find_symbol and read_file with symbol= show more):\n{repo_map}")


def observation_header(n: int, tool: str) -> str:
    return f"Output of step {n} ({tool}):\n"


def correction(problem: str, *, native: bool) -> str:
    """The message that answers a reply which was not a decision."""
    if native:
        return (f"ERROR: your reply could not be used ({problem}). Call one of the tools, "
                "or reply with your final answer in plain text when the task is done.")
    return (f"ERROR: your reply was not a decision ({problem}). Reply with exactly one JSON "
            f"object: {_DECISION_SHAPE}.")


def elided(n: int, tool: str, size: int) -> str:
    return (f"[elided to save context: the {size}-character output of step {n} ({tool}); "
            "call the tool again if you need it]")
