"""``python -m yggdrasil.loki``: the same as the ``loki`` command."""

from yggdrasil.loki.cli import main

raise SystemExit(main())
