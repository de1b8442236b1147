"""Outputs: long outputs cut so that nothing is lost, in model tokens (internal).

Owns the token count (``tokens``: tiktoken's o200k_base where its table is installed, a
stated estimate elsewhere), the spill folder of a session (``Spill``: the whole of every
cut output, named by ids such as ``output://3f9a2c1e/2`` that read_file and grep accept;
outside the root, hidden from commands, expiring by age and size), and the cut itself
(``cut_text``: head, tail, the lines from the middle that look like errors, the id).
:class:`Outputs` bundles them with the caps of one toolbox. Imports nothing of the agent
but ``yggdrasil.io`` (it stands below ``results`` and everything that cuts an output).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ._cut import ERROR_WORDS, ErrorLine, cut_text, errors_note, scan_errors, seen_note
from ._spill import ID_PATTERN, Spill, Spilled, SpillError, SpillLimits, spill_base
from ._tokens import ESTIMATE, Tokens, tokens

__all__ = [
    "ERROR_WORDS",
    "ESTIMATE",
    "ID_PATTERN",
    "ErrorLine",
    "Outputs",
    "Spill",
    "SpillError",
    "SpillLimits",
    "Spilled",
    "Tokens",
    "cut_text",
    "errors_note",
    "scan_errors",
    "seen_note",
    "spill_base",
    "tokens",
]


@dataclass
class Outputs:
    """The caps of one toolbox's outputs, in tokens, and its spill folder (None: cut
    outputs are not kept). ``observation``: one tool's answer; ``step``: what one step of
    the loop adds to the conversation; ``stream``: the head, and the tail, of a
    command's cut stream."""

    spill: Spill | None = None
    observation: int = 50_000
    step: int = 8_000
    stream: int = 3_000
    tokens: Tokens = field(default_factory=lambda: tokens)

    def cut(self, text: str, budget: int | None = None, whole: str = "output") -> str:
        """``text`` within ``budget`` tokens (default: the observation cap)."""
        return cut_text(text, self.observation if budget is None else budget, self.tokens,
                        self.spill, whole)
