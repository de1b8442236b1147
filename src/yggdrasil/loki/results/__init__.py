"""Results: what a tool call answers, as data, and the one renderer of its text (internal).

Owns :class:`ToolResult` (content parts, the typed data, ``is_error``/``refused``, the
files a call changed), the content parts (``TextPart``, ``ImagePart``), the base of every
built-in tool's typed result (``Result``) with the kinds themselves (a command's exit
and streams, background jobs...; errors and refusals), the renderer that turns a result
into what a model reads (``render_parts``/``tool_result``: each kind registers its text
beside its model) and the bounds on what any tool hands back (``clip_*``, ``MAX_*``).
The hands build results; the toolbox renders them; MCP, the CLI, events, transcripts and
fleets read the data. Imports only ``errors`` and ``yggdrasil.io``.
"""

from __future__ import annotations

from ._base import ErrorResult, ImagePart, Part, Refusal, Result, TextPart, ToolResult, plain
from ._bounds import (
    MAX_ENTRIES,
    MAX_HITS,
    MAX_LINE,
    MAX_OBSERVATION,
    MAX_READ_CHARS,
    MAX_READ_LINES,
    clip_line,
    clip_list,
    clip_text,
    did_you_mean,
    human_size,
    json_text,
    printable,
)
from ._checkpoints import (
    CheckpointInfo,
    CheckpointList,
    NotRestored,
    Restored,
    RewindResult,
)
from ._commands import (
    GIT_RULE,
    HOW_TO_ALLOW_GIT,
    MAX_CHANGE_LINES,
    CommandResult,
    FileChange,
    JobInput,
    JobList,
    JobReport,
    JobRow,
    JobStarted,
    JobState,
    StreamOutput,
    changed_section,
    cut_note,
    job_state,
)
from ._remote import RemoteResult, remote_error
from ._render import (
    error_result,
    hook_refusal,
    render_parts,
    render_text,
    renders,
    retexted,
    shows,
    text_result,
    tool_result,
)
from ._search import FoundFiles, GrepMatches, Match, SearchSkips, match_line, skip_note

__all__ = [
    "GIT_RULE",
    "HOW_TO_ALLOW_GIT",
    "MAX_CHANGE_LINES",
    "MAX_ENTRIES",
    "MAX_HITS",
    "MAX_LINE",
    "MAX_OBSERVATION",
    "MAX_READ_CHARS",
    "MAX_READ_LINES",
    "CheckpointInfo",
    "CheckpointList",
    "CommandResult",
    "ErrorResult",
    "FileChange",
    "FoundFiles",
    "GrepMatches",
    "ImagePart",
    "JobInput",
    "JobList",
    "JobReport",
    "JobRow",
    "JobStarted",
    "JobState",
    "Match",
    "NotRestored",
    "Part",
    "Refusal",
    "RemoteResult",
    "Restored",
    "Result",
    "RewindResult",
    "SearchSkips",
    "StreamOutput",
    "TextPart",
    "ToolResult",
    "changed_section",
    "clip_line",
    "clip_list",
    "clip_text",
    "cut_note",
    "did_you_mean",
    "error_result",
    "hook_refusal",
    "human_size",
    "job_state",
    "json_text",
    "match_line",
    "plain",
    "printable",
    "remote_error",
    "render_parts",
    "render_text",
    "renders",
    "retexted",
    "shows",
    "skip_note",
    "text_result",
    "tool_result",
]
