"""``loki fleet TASKS.jsonl --out DIR``: run a batch of tasks on a process pool or Ray.

On a terminal a live display (stderr) shows done / failed / running, tokens and the ETA,
with a line per finished task above it; otherwise each finished task prints one plain
line. A summary (verified rate, tokens, cost) ends the run. Thin: ``fleet/`` does the work.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

from ._common import EXIT_INTERRUPTED, EXIT_OK, EXIT_TOOL_ERROR, CliError, wrap
from ._flags import add_settings_flags
from ._toolbox import add_profile_flag, announce_settings, cli_settings, fleet_fence

__all__ = ["add_fleet", "run_fleet"]

EXAMPLES = """examples:
  loki fleet tasks.jsonl --out runs/r1 --engine openai --base-url http://llm:8000/v1 --model qwen3-coder
  loki fleet tasks.jsonl --out runs/r1 --backend ray --address ray://head:10001 --workers 256
  loki fleet tasks.jsonl --out runs/r1 --engine scripted --model 'scripts/{id}.jsonl'

a task is one JSON object per line:
  {"id": "django-1234", "repo": "/data/django.git", "commit": "abc123", "prompt": "...",
   "setup": "pip install -e .", "verify": "pytest -x tests/test_x.py", "max_steps": 50}

Running again with the same --out skips the tasks already in its results.jsonl.
exit codes: 0 every task finished, 1 some task failed, 2 bad command line or tasks file,
130 interrupted (the finished tasks stay recorded)."""


def add_fleet(commands: Any) -> None:
    parser = commands.add_parser(
        "fleet", help="run a batch of tasks (JSONL) on a process pool or a Ray cluster",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXAMPLES,
        description=wrap(
            "Run every task of TASKS (JSONL) through the agent, each in its own working "
            "copy with commands fenced, on --workers processes (--backend local) or a Ray "
            "cluster. Results go to DIR/results.jsonl as tasks finish, SWE-bench "
            "predictions to DIR/preds.json, transcripts to DIR/<id>/transcript.jsonl."))
    parser.set_defaults(run=run_fleet)
    parser.add_argument("tasks", metavar="TASKS.jsonl", help="the tasks, one JSON object per line")
    parser.add_argument("--out", required=True, metavar="DIR", help="the output folder")
    parser.add_argument("--backend", choices=("local", "ray"), default="local",
                        help="local: a process pool on this machine (default); ray: a Ray cluster")
    parser.add_argument("--address", metavar="ADDR",
                        help="the Ray cluster to join (ray://host:10001, or auto)")
    parser.add_argument("--workers", type=int, default=4, metavar="N",
                        help="tasks running at once (default 4)")
    parser.add_argument("--max-in-flight", type=int, metavar="N",
                        help="model requests in flight across the fleet (default: --workers; "
                             "lowered by itself while the endpoint answers mostly 429)")
    parser.add_argument("--cpus-per-task", type=float, default=1.0, metavar="N",
                        help="Ray: CPUs each attempt reserves (default 1; a cluster the fleet "
                             "starts gets --workers times this)")
    parser.add_argument("--resource", action="append", default=[], metavar="NAME=N",
                        help="Ray: a custom resource each attempt reserves (repeatable)")
    parser.add_argument("--redo", choices=("none", "failed", "all"), default="none",
                        help="run again the tasks already recorded in --out: none (default), "
                             "the failed ones, or all")
    parser.add_argument("--refresh", choices=("auto", "always", "never"), default="auto",
                        help="when each node fetches its mirror of a repository: auto (once "
                             "per run, for tasks naming a branch or no commit; default), "
                             "always (every attempt), never (only for a missing commit)")
    parser.add_argument("--engine", metavar="NAME",
                        help="openai, anthropic, ollama or scripted (default: LOKI_ENGINE)")
    parser.add_argument("--model", metavar="M",
                        help="model name; {id} becomes the task id (scripted: scripts/{id}.jsonl)")
    parser.add_argument("--base-url", metavar="URL", help="API base URL (OpenAI-compatible servers)")
    toolbox = parser.add_argument_group("the agent's toolbox (verify: nothing protected, "
                                        "no rules)")
    add_profile_flag(toolbox)
    add_settings_flags(toolbox, exclude=("read_only", "web.enabled"))
    parser.add_argument("--cache", metavar="DIR",
                        help="each node's mirrors and working copies (default "
                             "~/.cache/yggdrasil-loki/fleet)")
    parser.add_argument("--price-in", type=float, metavar="USD",
                        help="price of a million input tokens, for the cost in the summary")
    parser.add_argument("--price-out", type=float, metavar="USD",
                        help="price of a million output tokens")


def _resources(given: list[str]) -> dict[str, float]:
    """``NAME=N`` flags as Ray resources; ValueError saying the form otherwise."""
    found = {}
    for item in given:
        name, _, amount = item.partition("=")
        try:
            found[name.strip()] = float(amount)
        except ValueError:
            raise ValueError(f"--resource {item!r}: give NAME=N, e.g. GPU=1 or "
                             "accelerator=0.5") from None
        if not name.strip() or found[name.strip()] <= 0:
            raise ValueError(f"--resource {item!r}: give NAME=N with N more than 0")
    return found


def run_fleet(args: argparse.Namespace) -> int:
    from ..fleet import Fleet, Task

    settings = cli_settings(args, root=".")
    try:
        tasks = Task.from_jsonl(args.tasks)
        fleet = Fleet(args.engine, model=args.model, base_url=args.base_url,
                      backend=args.backend, workers=args.workers, out=args.out,
                      address=args.address, max_in_flight=args.max_in_flight,
                      settings=settings, cache_dir=args.cache, cpus_per_task=args.cpus_per_task,
                      resources=_resources(args.resource), redo=args.redo,
                      refresh=args.refresh)
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    agent = fleet.settings.toolbox
    announce_settings(agent, fleet_fence(agent), root=None,
                      confirm="none: attempts run unattended, each in a working copy of its own")
    display = Display(fleet, live=sys.stderr.isatty())
    try:
        with display:
            for result in fleet.run(tasks):
                display.finished(result)
    except KeyboardInterrupt:
        print(summary(fleet, args, tally(args.out)), file=sys.stderr)
        return EXIT_INTERRUPTED
    except (RuntimeError, ImportError) as exc:
        raise CliError(str(exc), EXIT_TOOL_ERROR) from exc
    counted = tally(args.out)
    print(summary(fleet, args, counted))
    ids = {t.id for t in tasks}
    failed = [i for i, c in counted.items() if c.status != "done" and i in ids]
    return EXIT_TOOL_ERROR if failed else EXIT_OK


@dataclass(frozen=True, slots=True)
class Counted:
    """What the summary counts of one recorded result (not the result: a run of 10,000
    tasks is summed without holding their patches and answers)."""

    status: str
    verified: bool | None
    tokens_in: int  # spent (0 when replayed)
    tokens_out: int
    replayed: int  # tokens replayed from a recording


def tally(out: str) -> dict[str, Counted]:
    """Each task recorded in ``out`` (the last line of an id wins), as counts."""
    from ..fleet import iter_results

    found = {}
    for r in iter_results(out):
        if r.tokens_replayed:
            replayed = sum(int(v) for k, v in r.usage.items() if k.endswith("_tokens"))
            found[r.id] = Counted(r.status, r.verified, 0, 0, replayed)
        else:
            found[r.id] = Counted(r.status, r.verified, int(r.usage.get("input_tokens", 0)),
                                  int(r.usage.get("output_tokens", 0)), 0)
    return found


class Display:
    """Live counters on a terminal (stderr); one plain line per finished task otherwise."""

    def __init__(self, fleet: Any, *, live: bool) -> None:
        from rich.console import Console

        self.fleet = fleet
        self.console = Console(stderr=live, highlight=False, soft_wrap=True)
        self.live: Any = None
        if live:
            from rich.live import Live

            self.live = Live(console=self.console, get_renderable=self._render,
                             refresh_per_second=4, transient=True)

    def __enter__(self) -> Display:
        if self.live is not None:
            self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.stop()

    def finished(self, result: Any) -> None:
        s = self.fleet.status
        mark = "done" if result.status == "done" else "FAILED"
        grade = {None: "", True: "  verified", False: "  not verified"}[result.verified]
        tokens = sum(int(v) for k, v in result.usage.items() if k.endswith("_tokens"))
        detail = (f"  {result.seconds:.1f}s  {result.reason}" if result.status != "done"
                  else f"{grade}  steps={result.steps}  tokens={tokens}  {result.seconds:.1f}s")
        line = f"[{s.finished}/{s.total - s.skipped}] {result.id}  {mark}{detail}"
        if self.live is not None:  # one line on the screen; results.jsonl has it all
            self.console.print(_cut(line, self.console.width), markup=False)
        else:
            print(line, flush=True)

    def _render(self) -> Any:
        from rich.progress_bar import ProgressBar
        from rich.table import Table

        s = self.fleet.status
        todo = s.total - s.skipped
        bar = 10 if self.console.width < 100 else 24
        row = Table.grid(padding=(0, 1))
        row.add_column(width=bar)
        row.add_column(no_wrap=True, overflow="ellipsis")
        row.add_row(ProgressBar(total=max(todo, 1), completed=s.finished, width=bar),
                    status_line(s, self.console.width - bar - 2))
        return row


def status_line(s: Any, width: int) -> str:
    """The live counters in ``width`` columns: the count done and the ETA always, then as
    many of the others as fit (the least useful dropped first)."""
    eta = s.eta()
    todo = s.total - s.skipped
    head = f"{s.finished}/{todo}"
    tail = f"ETA {_clock(eta) if eta is not None else '?'}"
    optional = [  # (priority: lower is kept longer, text)
        (0, f"failed {s.failed}"), (1, f"running {s.running}"),
        (2, f"queued {s.queued}" if s.queued else ""), (4, f"done {s.done}"),
        (3, f"429s {s.rate_limited}" if s.rate_limited else ""),
        (5, f"tokens {_count(s.input_tokens)} in / {_count(s.output_tokens)} out"),
        (6, _clock(time.monotonic() - s.started))]
    kept = [(p, text) for p, text in optional if text]
    while kept and len("  ".join([head, *(t for _, t in kept), tail])) > width:
        kept.remove(max(kept, key=lambda item: item[0]))
    return "  ".join([head, *(t for _, t in kept), tail])


def _count(n: int) -> str:
    return f"{n:,}" if n < 100_000 else f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.0f}k"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 1)] + "…"


def summary(fleet: Any, args: argparse.Namespace, counted: dict[str, Counted]) -> str:
    """The end of a run: counts, verified rate, tokens and cost over ``counted``,
    everything recorded in --out (``tally``)."""
    s = fleet.status
    results = list(counted.values())
    done = [r for r in results if r.status == "done"]
    graded = [r for r in results if r.verified is not None]
    verified = sum(1 for r in graded if r.verified)
    tokens_in = sum(r.tokens_in for r in results)
    tokens_out = sum(r.tokens_out for r in results)
    replayed = sum(r.replayed for r in results)
    lines = [f"fleet: {len(results)} tasks recorded in {args.out} ({s.total - s.skipped} run "
             f"now, {s.skipped} skipped: already there), {_clock(time.monotonic() - s.started)}",
             f"  done {len(done)}, failed {len(results) - len(done)}, retried {s.retries}"]
    if graded:
        lines.append(f"  verified {verified}/{len(graded)} ({100 * verified / len(graded):.1f}%)")
    lines.append(f"  tokens {tokens_in:,} in / {tokens_out:,} out in the results; this run: "
                 f"{s.requests:,} requests, {s.input_tokens:,} in / {s.output_tokens:,} out "
                 f"counting failed attempts, {s.rate_limited} answered 429")
    if replayed:
        lines.append(f"  {replayed:,} tokens replayed from recordings (not spent, not in the cost)")
    lines += [f"  note: {note}" for note in s.notes]
    if args.price_in is not None or args.price_out is not None:
        cost = (tokens_in * (args.price_in or 0) + tokens_out * (args.price_out or 0)) / 1e6
        lines.append(f"  cost ${cost:,.2f}")
    else:
        lines.append("  cost: unknown (--price-in/--price-out give the price per million tokens)")
    lines.append(f"  results {args.out}/results.jsonl, predictions {args.out}/preds.json")
    if os.path.isfile(os.path.join(args.out, "report.html")):
        lines.append(f"  report {args.out}/report.html (loki report {args.out} summarises it)")
    return "\n".join(lines)


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


