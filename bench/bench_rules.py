"""What checking command rules at every exec, and UNIX connects, cost: side by side.

``run`` of one line that starts ``/bin/true`` N times (500 by default: a loop in bash, so
each is a fork and an execve the supervisor stops, reads and answers), through a toolbox
with no rules (no supervisor: nothing stopped) and through one with five rules (every
exec read from /proc/<pid>/mem, resolved and matched). The two take turns each round, so
load from other work hits both. Target: at most 1.5x.

The socket check stops every ``connect`` of a fenced command, rules or not: a Python
command making N connections to a UNIX socket in its TMPDIR, and N to a TCP listener on
127.0.0.1 (both taken, read and made by the supervisor: never let the kernel read them
again), with the check on and off (off: the toolbox before it, by patching
``Shell.sockets_guarded``).

Usage: PYTHONPATH=src python bench/bench_rules.py [--execs 500] [--connects 500] [--rounds 5]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _timing import interleaved_ms
from yggdrasil.loki.sandbox import isolation_status
from yggdrasil.loki.shell import Shell
from yggdrasil.loki.tools import filesystem_toolbox

CONNECTS = """
import os, socket, sys
n = int(sys.argv[1])
path = os.path.join(os.environ["TMPDIR"], "s.sock")
unix = socket.socket(socket.AF_UNIX)
unix.bind(path)
unix.listen(n + 1)
tcp = socket.create_server(("127.0.0.1", 0), backlog=n + 1)
for family, address in ((socket.AF_UNIX, path), (socket.AF_INET, tcp.getsockname())):
    for _ in range(n):
        c = socket.socket(family)
        c.connect(address)
        c.close()
print("done")
"""

RULES = [("deny", "git push"), ("deny", "curl"), ("ask", "rm -rf"), ("allow", "pytest"),
         ("deny", "npm publish")]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--execs", type=int, default=500)
    parser.add_argument("--connects", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(isolation_status())
    line = f"for i in $(seq {args.execs}); do /bin/true; done; echo done"
    with tempfile.TemporaryDirectory(dir="/var/tmp") as small:
        root = Path(small)
        plain = filesystem_toolbox(root, allow_shell=True)
        ruled = filesystem_toolbox(root, allow_shell=True, rules=RULES)
        for box in (plain, ruled):  # the line really runs to its end
            out = box.call("run", {"command": line})
            assert out.startswith("exit=0") and "done" in out, out
        times = interleaved_ms({
            "no rules": lambda: plain.call("run", {"command": line}),
            "five rules": lambda: ruled.call("run", {"command": line}),
        }, args.rounds)
        plain.close()
        ruled.close()
    _table(f"run of a line that execs /bin/true {args.execs} times, median of {args.rounds}:",
           times, "no rules", args.execs, "exec")
    _table(f"run_python making {args.connects} UNIX + {args.connects} TCP connects, median of "
           f"{args.rounds}:", connects(args.connects, args.rounds), "check off",
           2 * args.connects, "connect")


def connects(n: int, rounds: int) -> dict[str, float]:
    guarded = Shell.sockets_guarded
    with tempfile.TemporaryDirectory(dir="/var/tmp") as small:
        box = filesystem_toolbox(Path(small), allow_shell=True)
        code = f"import sys; sys.argv[1:] = ['{n}']\n{CONNECTS}"

        def call(on: bool) -> str:
            Shell.sockets_guarded = guarded if on else (  # type: ignore[method-assign]
                lambda self, fence: False)
            try:
                out = box.call("run_python", {"code": code})
            finally:
                Shell.sockets_guarded = guarded  # type: ignore[method-assign]
            assert out.startswith("exit=0") and "done" in out, out
            return out

        times = interleaved_ms({"check off": lambda: call(False),
                                "check on": lambda: call(True)}, rounds)
        box.close()
    return times


def _table(title: str, times: dict[str, float], base_name: str, count: int, what: str) -> None:
    base = times[base_name]
    print(title)
    for name, ms in times.items():
        print(f"  {name:<12} {ms:9.1f} ms  {ms / base:5.2f}x  "
              f"({(ms - base) * 1000 / count:6.1f} us per {what} over {base_name})")


if __name__ == "__main__":
    main()
