"""``python -m yggdrasil.loki.sandbox``: what this machine offers to fence commands."""

from yggdrasil.loki.sandbox import landlock_status

print(landlock_status())
