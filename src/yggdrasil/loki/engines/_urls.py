"""Showing a URL without its secrets: the one redaction every site that shows or stores an
engine's (or a repository's) URL goes through.

A base URL may carry a password or a token (``http://user:PASS@host/v1``,
``https://host/v1?api_key=TOKEN``): the SDK needs it, nothing else does. Every
``scheme://`` URL inside a text gets its userinfo (everything of the authority before its
last ``@``, so a raw ``@`` in a password cannot leave the rest in view) shown as ``***``,
and the value of every query or fragment parameter whose name says it holds a credential
(``key``, ``token``, ``secret``, ``password``, ``sig``, ``auth``...) shown as ``***``. An
scp-style ``git@host:path`` carries a login name, no secret, and stays.
"""

from __future__ import annotations

import re

__all__ = ["SECRET_PARAM", "shown_url"]

# a URL inside free text: scheme://, then up to whitespace or a quote/bracket that ends it
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>`]*")
_AUTHORITY = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)([^/?#]*)@")
# a parameter's name that says its value is a credential (case-insensitive, anywhere in it:
# api_key, apiKey, access_token, X-Amz-Signature, client_secret, password, auth, jwt...)
SECRET_PARAM = re.compile(
    r"key|token|secret|pass|pwd|sig|auth|credential|session|jwt|bearer|^code$", re.I)
_PARAM = re.compile(r"([?&#;])([^=&#;]*)=([^&#;]*)")


def _masked(found: re.Match[str]) -> str:
    url = _AUTHORITY.sub(r"\1***@", found.group(0), count=1)
    return _PARAM.sub(_masked_param, url)


def _masked_param(found: re.Match[str]) -> str:
    sep, name, value = found.groups()
    if value and SECRET_PARAM.search(name):
        return f"{sep}{name}=***"
    return found.group(0)


def shown_url(text: str) -> str:
    """``text`` with the userinfo and credential parameters of every URL in it masked."""
    if "://" not in text:
        return text
    return _URL.sub(_masked, text)
