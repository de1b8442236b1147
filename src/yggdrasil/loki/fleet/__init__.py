"""Fleets: many confined ``Loki.act`` runs, on a local process pool or a Ray cluster.

Owns the fleet driver (``Fleet``: scheduling, retries, timeouts, the output folder), the
attempt a worker runs (a working copy from a per-node git mirror or a folder copy, setup,
the agent, the patch, verify in a fresh copy), the fleet-wide rate gate, the two
backends, and the report of a run (``read_run``: the output folder as data;
``write_report``: one self-contained HTML page, with the ``report`` extra). Imports the
public library below it (``agent``, ``tools``, ``engine``, ``errors``) and ``sandbox``
(to run a task's setup); only ``cli`` imports it. Importing it imports neither ray nor
plotly: only the ray backend and the report's page do, when used.
"""

from __future__ import annotations

from ._fleet import BACKENDS, Fleet, FleetStatus
from ._report import write_report
from ._report_data import RunReport, read_run
from ._store import iter_results
from ._task import Task, TaskResult

__all__ = ["BACKENDS", "Fleet", "FleetStatus", "RunReport", "Task", "TaskResult", "iter_results",
           "read_run", "write_report"]
