"""One run of ``Loki.act``: the conversation, the prompt, the steps and the transcript (internal).

Owns the reason -> act -> observe loop itself (``Run``), what it says to the model (system
prompt, observation headers, corrections), the conversation and its budget, the results
(``ActStep``, ``ActResult``, re-exported by ``yggdrasil.loki``) and the JSONL transcript.
The one place where an engine (``brain``) and a toolbox (``toolbox``) meet; imports those
two and ``files`` (for the observation caps), never ``agent`` above it.
"""

from __future__ import annotations

from ._result import ActResult, ActStep, ProtocolName
from ._run import Run
from ._transcript import Transcript

__all__ = ["ActResult", "ActStep", "ProtocolName", "Run", "Transcript"]
