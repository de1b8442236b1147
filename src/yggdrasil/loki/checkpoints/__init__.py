"""Checkpoints and rewind (internal): the root's files after every step, and putting
them back.

Owns ``Checkpoints`` (a toolbox's timeline: a baseline of every file the run found,
taken in the background, then after each call the state of each path it changed; a
rewind to any step, checked path by path, through ``Root``), the store they live in
(``files.Store``: blobs by content, compressed, deduplicated, shared by every run of the
user), pruning by age and size, and ``state_folder``: where loki keeps what outlives a
process (``$LOKI_STATE_DIR``, else ``$XDG_STATE_HOME/loki``, else ``~/.local/state/loki``).
Imports ``files`` (Root, the journal, the store), ``shell`` (the tree walk of change
tracking) and ``results``.
"""

from __future__ import annotations

import os
from pathlib import Path

from ._checkpoints import CheckpointLimits, Checkpoints, new_run_id
from ._plan import materialize, plan
from ._prune import prune
from ._rewind import apply, folders, lock_root
from ._state import State, observe
from ._timeline import Baseline, Timeline

__all__ = [
    "Baseline",
    "CheckpointLimits",
    "Checkpoints",
    "State",
    "Timeline",
    "apply",
    "checkpoint_folder",
    "folders",
    "lock_root",
    "materialize",
    "new_run_id",
    "observe",
    "plan",
    "prune",
    "state_folder",
]


def state_folder() -> Path:
    """Where loki keeps what outlives a process: transcripts (``runs/``), checkpoints."""
    if os.environ.get("LOKI_STATE_DIR"):
        return Path(os.environ["LOKI_STATE_DIR"])
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "loki"


def checkpoint_folder() -> Path:
    """The checkpoint store of this user: beside the runs folder."""
    return state_folder() / "checkpoints"
