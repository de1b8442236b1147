"""One run of ``Loki.act``: the conversation, the prompt, the steps and the transcript (internal).

Owns the reason -> act -> observe loop itself (``Run``), what it says to the model (system
prompt, observation headers, corrections), the conversation and its budget, the results
(``ActStep``, ``ActResult``, re-exported by ``yggdrasil.loki``), the JSONL transcript and
the event stream (``events.schema.json``), the instructions (AGENTS.md) and sessions.
The one place where an engine (``engines``) and a toolbox (``toolbox``) meet; imports those
two and ``files`` (for the observation caps), never ``agent`` above it.
"""

from __future__ import annotations

from ._instructions import AGENTS_FILE, MAX_INSTRUCTIONS, Instructions, gather_instructions
from ._result import ActResult, ActStep, ProtocolName
from ._run import Run
from ._session import Session, carry_changes, new_run_id
from ._transcript import EVENTS_SCHEMA, Transcript, events_schema

__all__ = ["AGENTS_FILE", "EVENTS_SCHEMA", "MAX_INSTRUCTIONS", "ActResult", "ActStep",
           "Instructions", "ProtocolName", "Run", "Session", "Transcript", "carry_changes",
           "events_schema",
           "gather_instructions", "new_run_id"]
