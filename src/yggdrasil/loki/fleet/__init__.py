"""Fleets: many confined ``Loki.act`` runs, on a local process pool or a Ray cluster.

Owns the fleet driver (``Fleet``: scheduling, retries, timeouts, the output folder), the
attempt a worker runs (a working copy from a per-node git mirror or a folder copy, setup,
the agent, the patch, verify in a fresh copy), the fleet-wide rate gate, and the two
backends. Imports the public library below it (``agent``, ``tools``, ``engine``,
``errors``) and ``sandbox`` (to run a task's setup); only ``cli`` imports it. Importing it
does not import ray: only the ray backend does, when a fleet uses it.
"""

from __future__ import annotations

from ._fleet import BACKENDS, Fleet, FleetStatus
from ._task import Task, TaskResult

__all__ = ["BACKENDS", "Fleet", "FleetStatus", "Task", "TaskResult"]
