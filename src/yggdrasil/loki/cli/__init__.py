"""The ``loki`` command (internal): one module per subcommand, thin by design.

``_common`` holds what every subcommand shares (options, the toolbox, confirm, errors,
exit codes); ``_tools``, ``_call``, ``_do`` and ``_mcp`` are the subcommands; ``_main``
builds the parser and runs one. Imports the public library (``tools``, ``agent``,
``engine``, ``errors``) and ``mcp``; nothing imports it but ``__main__`` and the console
script ``loki = yggdrasil.loki.cli:main``.
"""

from __future__ import annotations

from ._main import main

__all__ = ["main"]
