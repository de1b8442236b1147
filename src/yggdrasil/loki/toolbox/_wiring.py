"""Settings made into the parts of a toolbox that outputs and diagnostics need.

``filesystem_toolbox`` hands in its settings groups (``outputs``, ``diagnostics``: read by
their field names, the settings package sits above this one) and gets the toolbox's
``Outputs`` (caps and spill folder), its ``Diagnostician`` (ruff, the language servers of
the settings over the defaults found on PATH, started in the fence ``reader`` makes),
and the file layer's hooks that tell the journal and the diagnostician about changes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..diagnostics import (
    Diagnostician,
    DiagnosticLimits,
    Fence,
    Launcher,
    Ruff,
    ServerSpec,
    resolve_program,
)
from ..files import Journal, Root
from ..outputs import Outputs, Spill, SpillLimits, spill_base

__all__ = ["diagnostician", "hooks", "outputs_of"]


def outputs_of(group: Any, root: Path) -> Outputs:
    """The toolbox's ``Outputs`` from ``settings.outputs``: its spill folder made now, so
    that the fence hides it from the first command on."""
    spill = None
    if group.keep_whole:
        spill = Spill(spill_base(root), SpillLimits(group.spill_bytes, group.spill_total,
                                                     group.spill_age))
        if not spill.prepare():
            spill = None
    return Outputs(spill, observation=group.observation_tokens, step=group.step_tokens,
                   stream=group.stream_tokens)


def diagnostician(group: Any, root: Root, reader: Fence,
                  found: Callable[[Path], dict[str, ServerSpec]]) -> Diagnostician | None:
    """The toolbox's diagnostician from ``settings.diagnostics``; None when off."""
    if not group.enabled:
        return None
    servers = found(root.path) if group.default_servers else {}
    unusable: list[str] = []
    for name, given in group.servers.items():
        servers.pop(name, None)
        if not given.command:
            continue
        program = resolve_program(given.command[0], root.path)
        if program is None:
            unusable.append(f"{name} ({given.command[0]}: not found outside the root)")
            continue
        servers[name] = ServerSpec(name, (program, *given.command[1:]), dict(given.languages),
                                   dict(given.init), dict(given.settings))
    limits = DiagnosticLimits(group.per_file, group.per_call, group.wait, group.hang, group.warm)
    doctor = Diagnostician(root, ruff=Ruff.found() if group.ruff else None, servers=servers,
                           start=Launcher(root.path, reader) if servers else None,
                           limits=limits)
    doctor.unusable = unusable
    return doctor


def hooks(journal: Journal, doctor: Diagnostician | None) -> dict[str, Any]:
    """``Files``' hooks: the journal hears every change, and the diagnostician too."""
    if doctor is None:
        return {"before_change": journal.before_write, "on_change": journal.after_write,
                "on_remove": journal.after_remove}

    def before(rel: str, real: Path) -> None:
        journal.before_write(rel, real)
        doctor.before(rel, real)

    def changed(rel: str) -> None:
        journal.after_write(rel)
        doctor.after(rel)

    def removed(rel: str) -> None:
        journal.after_remove(rel)
        doctor.after(rel)

    return {"before_change": before, "on_change": changed, "on_remove": removed}
