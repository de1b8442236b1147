"""``python -m yggdrasil.loki.sandbox``: what this machine offers to fence commands."""

from yggdrasil.loki.sandbox import isolation_status, landlock_status

print(landlock_status())
print(isolation_status())
