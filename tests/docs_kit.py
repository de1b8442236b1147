"""What the documentation's code blocks run against (tests/test_docs.py).

Each ```python block of docs/ (and of README.md) runs in a fresh copy of a small sample
project, as its working folder, with ``HOME`` a fresh folder of the test's. The engines
reach a model server on 127.0.0.1 that speaks OpenAI's and Anthropic's wire formats and
answers every request with a final answer (the SDKs find it through their own
environment variables, so a snippet says ``Loki("anthropic")`` as a reader would).
A page's reader has a project of their own; the file names below are the ones the
pages use.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from fake_servers import FakeModelServer, _Handler, anthropic_reply, openai_reply

CLI = '''\
"""A small command line."""
import argparse


def main(argv=None, verbose=False):
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    args = parser.parse_args(argv)
    print(f"hello {args.name}")
    return 0
'''

APP = "def main():\n\tif ready:\n\t\tgo()\n\treturn 0\n\n\na = 1\nb = 1\nb = 1\ndebug = False\n"

FIX = """\
--- a/app.py
+++ b/app.py
@@ -1,4 +1,4 @@
 def main():
-\tif ready:
+\tif ready():
 \t\tgo()
 \treturn 0
"""

CART = '''\
"""A shopping cart."""
from dataclasses import dataclass, field

TAX_RATE = 0.2


@dataclass
class Cart:
    """What a customer is buying."""

    items: list = field(default_factory=list)

    def total(self, discount: float = 0.0) -> float:
        """The price of everything, taxed."""
        return sum(self.items) * (1 + TAX_RATE) - discount

    @property
    def empty(self) -> bool:
        return not self.items


def checkout(cart: Cart) -> None:
    def log(msg):
        print(msg)
    log(cart.total())
'''

# the fleets page's first example: three tasks on this project, and a model's one answer
TASKS = """\
{"id": "greet", "repo": ".", "prompt": "make cli.py greet in French", "verify": "grep -q bonjour cli.py"}
{"id": "runs", "repo": ".", "prompt": "check that cli.py runs", "verify": "python cli.py world", "max_steps": 10}
{"id": "data", "repo": ".", "prompt": "summarise the sales", "setup": "test -f data/sales.csv"}
"""
ANSWER = '{"thought": "nothing to change", "done": true, "answer": "ok"}\n'

FILES = {
    "README.md": "# Sample\n\nA small project the documentation's examples run in.\n",
    "cli.py": CLI,
    "app.py": APP,
    "fix.diff": FIX,
    "shop/__init__.py": "",
    "shop/cart.py": CART,
    "src/app.py": "def main():\n    return run_test()\n\n\ndef run_test():\n    return 0\n",
    "tests/test_cli.py": "from cli import main\n\n\ndef test_main():\n    assert main(['you']) == 0\n",
    "sales.csv": "shop,city,price\n1,Oslo,20.0\n2,Rome,20.0\n3,Lima,5.0\n",
    "shops.csv": "shop,name\n1,North\n2,South\n3,West\n",
    "data/sales.csv": "day,city,price\n2024-01-01,Oslo,20.0\n2024-01-02,Rome,30.5\n",
    "logs/2024.ndjson": '{"level": "error", "msg": "boom"}\n{"level": "info", "msg": "ok"}\n',
    "tasks.jsonl": TASKS,
    "answer.jsonl": ANSWER,
    ".gitignore": "runs/\n",
    ".env": "API_TOKEN=not-a-real-secret\n",
}


def make_project(root: Path) -> None:
    """The sample project, a git repository with one commit."""
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    import polars as pl
    pl.read_csv(root / "sales.csv").write_parquet(root / "sales.parquet")
    git = ["git", "-c", "user.name=docs", "-c", "user.email=docs@example.org"]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "start"]):
        subprocess.run([*git, *args], cwd=root, check=True)


class AnswerEverything(FakeModelServer):
    """A model server whose every reply is a final answer, in the wire format asked."""

    def __init__(self) -> None:
        super().__init__()
        self.RequestHandlerClass = _AnswerHandler


class _AnswerHandler(_Handler):
    def do_POST(self) -> None:
        anthropic = self.path.endswith("/messages")
        reply = anthropic_reply("done") if anthropic else openai_reply("done")
        self.server.replies.append(reply)
        super().do_POST()
