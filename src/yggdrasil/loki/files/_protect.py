"""Protected files: paths inside the root that may hold secrets, which no tool touches.

A :class:`Protection` is a list of globs in gitignore syntax matched against root-relative
paths (``*.pem`` at any depth, ``/config/local.yml`` from the root only, ``.aws/`` a folder
and everything below it, ``!.env.example`` an exception, the last matching line wins).
:class:`~yggdrasil.loki.files.Root` holds one and refuses every protected path it is asked
to resolve or open, so each tool built on it (reads, writes, edits, patches, tables, saves)
refuses them without a check of its own; the walkers (find, grep, the code index) skip them
and count them; commands get them masked in their mount namespace (``shell``).

The matcher is handed in (``search`` compiles gitignore lines with RE2), so this package
needs no glob engine of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..errors import PathError

# What holds secrets in a project: dotenv files (not their shareable templates), keys and
# certificates, package-registry and git credentials, password vaults, cloud credentials.
DEFAULT_PROTECTED: tuple[str, ...] = (
    ".env", ".env.*", "!.env.example", "!.env.sample", "!.env.template",
    "*.pem", "*.key", "*.p12", "*.pfx", "id_rsa*", "id_ed25519*", "id_ecdsa*",
    ".netrc", ".npmrc", ".pypirc", ".git-credentials", "*.kdbx",
    "credentials.json", "service-account*.json", "secrets.*", ".aws/", ".ssh/",
)
"""The globs protected by default (gitignore syntax; ``!`` lines are exceptions).

``filesystem_toolbox(protect=DEFAULT_PROTECTED + ("*.sqlite",))`` adds to them, a list of
your own replaces them, ``protect=()`` turns protection off."""
HOW_TO_CHANGE = ("the user sets the list with filesystem_toolbox(protect=...) (protect=() "
                 "turns it off) or loki --protect GLOB / --no-protect")


class GlobRules(Protocol):
    """gitignore lines compiled: the line deciding ``rel`` (last match wins), or None."""

    def decisive(self, rel: str, is_dir: bool) -> tuple[str, bool] | None:
        """(original line, True when it protects / False for a ``!`` exception)."""
        ...


class ProtectedError(PathError):
    """A tool was asked for a protected path; the message says why and who can change it."""

    category = "protected"

    def __init__(self, rel: str, glob: str) -> None:
        self.rel, self.glob = rel, glob
        shown = f"{rel}/" if glob.endswith("/") and not rel.endswith("/") else rel
        super().__init__(
            f"{shown} is protected: it may hold secrets (it matches the protected glob "
            f"{glob!r}), so no tool reads, lists, searches, edits, overwrites, moves or "
            f"deletes it, and commands see it as unreadable; {HOW_TO_CHANGE}", rule=glob)


@dataclass(frozen=True)
class Protection:
    """The protected globs and their compiled rules; ``protect=()`` is no protection."""

    globs: tuple[str, ...]
    rules: GlobRules = field(repr=False, compare=False)

    def __bool__(self) -> bool:
        return any(not g.lstrip().startswith(("#", "!")) and g.strip() for g in self.globs)

    def describe(self) -> str:
        """One line for the toolbox status: what is protected and what that means."""
        shown = [g.strip() for g in self.globs if g.strip() and not g.lstrip().startswith("#")]
        return ("Protected files (they may hold secrets; no tool reads, lists, searches, "
                f"edits, moves or deletes them): {', '.join(shown)}.")

    def entry(self, rel: str, is_dir: bool) -> str | None:
        """The glob protecting this entry itself (its folders not looked at), or None.
        For walkers, which never enter a protected folder."""
        found = self.rules.decisive(rel, is_dir)
        return found[0] if found is not None and found[1] else None

    def covering(self, rel: str, is_dir: bool) -> tuple[str, str] | None:
        """(protected path, glob) when ``rel`` or a folder above it is protected."""
        parts = rel.split("/")
        for n in range(1, len(parts) + 1):
            here = "/".join(parts[:n])
            glob = self.entry(here, is_dir or n < len(parts))
            if glob is not None:
                return here, glob
        return None

    def check(self, rel: str, is_dir: bool) -> None:
        """Raise ProtectedError when ``rel`` (root-relative, '.' for the root) is protected."""
        if rel in ("", "."):
            return
        hit = self.covering(rel, is_dir)
        if hit is not None:
            raise ProtectedError(rel, hit[1])


def protect_globs(protect: Sequence[str] | str | None) -> tuple[str, ...]:
    """The globs as given (None: the default list); a bare string is one glob, not letters."""
    if protect is None:
        return DEFAULT_PROTECTED
    if isinstance(protect, str):
        return (protect,)
    return tuple(protect)
