"""``python -m yggdrasil.loki``: the same as the ``loki`` command.

``-m`` puts the working folder first on ``sys.path``; run from an agent root, a
``polars.py`` or ``yaml.py`` a command left there would be imported by the tools, unfenced.
So the working folder goes first thing, as ``python -P`` would drop it (modules loaded
before this file runs are the interpreter's own and ``yggdrasil.loki``'s ``__init__``).
"""

import os
import sys

if not sys.flags.safe_path and sys.path and sys.path[0] in ("", os.curdir, os.getcwd()):
    del sys.path[0]

from yggdrasil.loki.cli import main

raise SystemExit(main())
