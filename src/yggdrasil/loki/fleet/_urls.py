"""Repository URLs: telling one from a path, showing one without its secret, and talking
to one without writing its secret anywhere.

A token in a repository URL (``https://user:TOKEN@host/r.git``, ``https://TOKEN@host/r.git``)
must reach git's HTTP requests and nothing else: not a mirror's ``remote.origin.url`` (every
working copy is a worktree of the mirror, so the agent would read it with ``git remote -v``),
not a message, not a command line (``/proc/<pid>/cmdline`` is readable by every process).
:func:`remote` splits it off into environment variables for the one git command that clones
or fetches (``GIT_CONFIG_*``: an ``Authorization`` header git sends and never stores).
"""

from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass, field
from urllib.parse import unquote, unquote_to_bytes, urlsplit

from ..engines import shown_url

__all__ = ["URL_SCHEMES", "Remote", "is_url", "local_folder", "remote", "shown_repo"]

# The transports a repo URL may use (git's own; the fleet's git calls allow only these).
URL_SCHEMES = ("file", "git", "http", "https", "ssh", "git+ssh", "ssh+git")
SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
_SCP_URL = re.compile(r"[A-Za-z0-9._-]+@[A-Za-z0-9._-]+:")  # git@host:owner/repo.git
# scheme://, then the userinfo: all of the authority (up to the first / ? #) before its
# last '@' (a raw '@' in a password must not leave the rest of it in view)
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)([^/?#]*)@")
_SSH = ("ssh", "git+ssh", "ssh+git")


def is_url(repo: str) -> bool:
    """A repository git clones by URL (``file://``, ``https://``, ``ssh://``, ``git@host:``)."""
    return bool(SCHEME.match(repo) or _SCP_URL.match(repo))


def shown_repo(repo: str) -> str:
    """``repo`` fit for a message or a result: the userinfo of every ``scheme://`` URL in
    it (a user and password, or a token alone) is shown as ``***``; the login of an
    scp-style ``git@host:path`` is no secret and stays; credential query parameters are
    masked too (the one redaction of engine and repository URLs alike)."""
    return shown_url(repo)


@dataclass(frozen=True)
class Remote:
    """How git reaches a repository: ``url`` (what it is told and may store: no password,
    no token) and ``env`` (the credentials, for the git commands that talk to it)."""

    url: str
    env: dict[str, str] = field(default_factory=dict)


def remote(repo: str) -> Remote:
    """``repo`` split into a URL without secrets and the credentials it carried.

    http(s): the userinfo becomes an ``Authorization: Basic`` header, given to git through
    ``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_0``/``GIT_CONFIG_VALUE_0`` (percent-escapes
    decoded, as git does; a token alone is a user with an empty password, as git sends it).
    ssh: the user is a login name and stays (ssh never uses a password from the URL).
    Other schemes carry no credentials: the userinfo is dropped.
    """
    found = _USERINFO.match(repo)
    if not found:
        return Remote(repo)
    head, userinfo = found.group(1), found.group(2)
    rest = repo[found.end():]
    user, _, password = userinfo.partition(":")
    scheme = head[:-3].lower()
    if scheme in _SSH:
        return Remote(f"{head}{user}@{rest}" if user else f"{head}{rest}")
    if scheme not in ("http", "https"):
        return Remote(f"{head}{rest}")
    pair = base64.b64encode(unquote_to_bytes(user) + b":" + unquote_to_bytes(password))
    return Remote(f"{head}{rest}", {"GIT_CONFIG_COUNT": "1",
                                    "GIT_CONFIG_KEY_0": "http.extraHeader",
                                    "GIT_CONFIG_VALUE_0": f"Authorization: Basic {pair.decode()}"})


def local_folder(repo: str) -> str | None:
    """The folder on this node that ``repo`` names (a path, or a ``file://`` URL, which git
    percent-decodes), resolved; the work tree when it names a ``.git`` folder. None for a
    repository reached over the network."""
    if SCHEME.match(repo):
        parts = urlsplit(repo)
        if parts.scheme.lower() != "file":
            return None
        path = unquote(parts.path)
    elif _SCP_URL.match(repo):
        return None
    else:
        path = os.path.expanduser(repo)
    folder = os.path.realpath(path)
    return os.path.dirname(folder) if os.path.basename(folder) == ".git" else folder
