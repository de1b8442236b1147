"""What protected files, command rules and the host-limited network cost.

Each case runs beside its baseline, in turn, and prints medians and the ratio:

- a command (``run("true")``) on a 50k-file tree with the default protected globs (20
  protected files in it, masked in the command's namespace) vs ``protect=()``;
- finding the protected paths of that tree: a first match of every path, the next
  command's (remembered) matches, and the walk used when the tracker has no view;
- grep over the tree with protection vs without, for each engine (ripgrep gets the
  globs as ``-g`` overrides, the Python walk asks the Protection per entry);
- a command with five rules vs none, and the rules' verdict on a long pipeline alone;
- a 64 MB download by curl from a local server: through the proxy (``network=[host]``)
  vs straight (``network=True``).

Usage: PYTHONPATH=src python bench/bench_secrets.py [--rounds 15] [--files 50000]
"""

from __future__ import annotations

import argparse
import http.server
import os
import subprocess
import threading
import time
from pathlib import Path

from _corpus import package_tree
from _timing import interleaved_ms
from yggdrasil.loki.files import Root
from yggdrasil.loki.search import Search, find_rg, protection
from yggdrasil.loki.shell import CommandRules, ProtectedPaths, parse_rules, walk_protected
from yggdrasil.loki.tools import DEFAULT_PROTECTED, filesystem_toolbox

CORPUS = Path(__file__).resolve().parent / ".corpus" / "secrets"
SECRETS = [".env", ".env.local", "certs/server.pem", "deploy/id_rsa", ".aws/credentials"]


def build(files: int) -> Path:
    stamp = CORPUS / f".built-{files}"
    if stamp.exists():
        return CORPUS
    subprocess.run(["rm", "-rf", str(CORPUS)], check=True)
    for n, leaf in enumerate(package_tree(CORPUS, files)):
        if n // 10 % 25 == 0 and n % 10 < 4:  # 16 more protected files deep in the tree
            (leaf / "service.key").write_text("KEY\n")
    for rel in SECRETS:
        (CORPUS / rel).parent.mkdir(parents=True, exist_ok=True)
        (CORPUS / rel).write_text("SECRET\n")
    stamp.write_text("")
    return CORPUS


def row(name: str, ours: float, base_name: str, base: float, unit: str = "ms") -> None:
    print(f"  {name:44} {ours:9.2f} {unit}   {base_name:26} {base:9.2f} {unit}   "
          f"ratio {ours / base:5.2f}")


def commands(root: Path, rounds: int) -> None:
    protected, open_ = filesystem_toolbox(root), filesystem_toolbox(root, protect=())
    ruled = filesystem_toolbox(root, protect=(), rules=[
        ("deny", "git push"), ("ask", "rm -rf"), ("allow", "pytest"), ("deny", "curl"),
        ("allow", "git status")], confirm=lambda a: True)
    got = interleaved_ms({"protect": lambda: protected.call("run", {"command": "true"}),
                       "open": lambda: open_.call("run", {"command": "true"}),
                       "rules": lambda: ruled.call("run", {"command": "true"})}, rounds)
    print(f"run('true') on a {sum(1 for _ in root.rglob('*.py'))}-file tree:")
    row("default protection (21 paths masked)", got["protect"], "protect=()", got["open"])
    row("five command rules", got["rules"], "no rules", got["open"])
    line = " | ".join(["grep -v x file.txt", "sort -u", "env A=1 xargs -n1 echo"] * 10)
    rules = CommandRules(parse_rules([("deny", "git push"), ("ask", "rm -rf")]))
    start = time.perf_counter()
    for _ in range(20):
        rules.verdict(line)
    print(f"  rules' verdict on a 30-command pipeline: {(time.perf_counter() - start) * 50:.2f} ms")


def mask_list(root: Path) -> None:
    files = dict.fromkeys(os.path.relpath(os.path.join(d, f), root)  # as the tracker holds them
                          for d, _, fs in os.walk(root) for f in fs).keys()
    dirs = [os.path.relpath(d, root) for d, _, _ in os.walk(root) if d != str(root)]
    protect = protection(DEFAULT_PROTECTED)
    memo = ProtectedPaths(protect)
    start = time.perf_counter()
    found = memo.outermost(files, dirs)
    cold = (time.perf_counter() - start) * 1000
    start = time.perf_counter()
    memo.outermost(files, dirs)
    warm = (time.perf_counter() - start) * 1000
    start = time.perf_counter()
    walk_protected(str(root), protect)
    walked = (time.perf_counter() - start) * 1000
    print(f"protected paths of {len(files)} files / {len(dirs)} folders ({len(found)} found):")
    row("every command after the first (remembered)", warm, "the first (all matched)", cold)
    row("a walk of its own (no tracker view)", walked, "the first (all matched)", cold)


def search(root: Path, rounds: int) -> None:
    with_p, without = Root.at(root, protection(DEFAULT_PROTECTED)), Root.at(root)
    print("grep 'VALUE = 4242' over the tree, include_ignored=True:")
    for engine in ["python", *(["rg"] if find_rg() else [])]:
        a, b = Search(with_p, backend=engine), Search(without, backend=engine)  # type: ignore[arg-type]
        got = interleaved_ms({"with": lambda a=a: a.grep("VALUE = 4242", include_ignored=True),
                           "without": lambda b=b: b.grep("VALUE = 4242", include_ignored=True)},
                          max(3, rounds // 3))
        row(f"{engine}: default protection", got["with"], "protect=()", got["without"])


class _Big(http.server.BaseHTTPRequestHandler):
    body = os.urandom(1 << 20) * 64

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


def proxy(root: Path, rounds: int) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.5", 0), _Big)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    limited = filesystem_toolbox(root, protect=(), network=[f"files.example:{port}"],
                                 allow_private_hosts=True, hosts={"files.example": "127.0.0.5"})
    direct = filesystem_toolbox(root, protect=())
    def get(host: str) -> str:
        return f"curl -fsS -o /dev/null http://{host}:{port}/big"

    got = interleaved_ms({
        "proxy": lambda: limited.call("run", {"command": get("files.example")}),
        "direct": lambda: direct.call("run", {"command": get("127.0.0.5")})},
        max(3, rounds // 3))
    server.shutdown()
    print("curl of 64 MB from a local server:")
    row("through the proxy (network=[host])", got["proxy"], "straight (network=True)",
        got["direct"])
    print(f"  proxy throughput: {64 / got['proxy'] * 1000:.0f} MB/s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--files", type=int, default=50_000)
    args = parser.parse_args()
    root = build(args.files)
    commands(root, args.rounds)
    mask_list(root)
    search(root, args.rounds)
    proxy(root, args.rounds)


if __name__ == "__main__":
    main()
