"""``loki report OUT``: a fleet run's summary on the terminal and its HTML page.

Thin: ``fleet.read_run`` reads the output folder, ``fleet.write_report`` writes the page;
this module prints the summary (rich tables: outcomes, failures by reason, repositories,
distributions) and where the page is.
"""

from __future__ import annotations

import argparse
from typing import Any

from ._common import EXIT_OK, EXIT_TOOL_ERROR, CliError, printable, wrap

__all__ = ["add_report", "run_report"]

SHOWN = 10  # rows of the reasons and repositories tables (the page has them all)
EXAMPLES = """examples:
  loki report runs/r1                       # summary, and runs/r1/report.html
  loki report runs/r1 --price-in 3 --price-out 15
  loki report runs/r1 --html /tmp/r1.html
  loki report runs/r1 --no-html             # the summary alone (no plotly needed)

exit codes: 0 written, 1 the page could not be written (e.g. the report extra is missing),
2 OUT holds no run or a bad option."""


def add_report(commands: Any) -> None:
    parser = commands.add_parser(
        "report", help="summarise a fleet run and write its HTML report",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXAMPLES,
        description=wrap(
            "Summarise the fleet run in OUT (the --out folder of `loki fleet`) on the "
            "terminal and write a self-contained HTML page (OUT/report.html): verified rate, "
            "failures by reason, distributions of time, steps, tokens and cost, a table per "
            "repository, a timeline of attempts per node, and each task's conversation and "
            "diff. The page opens offline; it needs the report extra "
            "(pip install 'yggdrasil-loki[report]')."))
    parser.set_defaults(run=run_report)
    parser.add_argument("out", metavar="OUT", help="the output folder of a fleet run")
    parser.add_argument("--html", metavar="PATH",
                        help="where to write the page (default OUT/report.html)")
    parser.add_argument("--no-html", action="store_true", help="print the summary only")
    parser.add_argument("--price-in", type=float, metavar="USD",
                        help="price of a million input tokens, for the costs")
    parser.add_argument("--price-out", type=float, metavar="USD",
                        help="price of a million output tokens")


def run_report(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ..fleet import read_run, write_report

    try:
        report = read_run(args.out, price_in=args.price_in, price_out=args.price_out)
    except (FileNotFoundError, ValueError) as exc:
        raise CliError(str(exc)) from exc
    console = Console(highlight=False, soft_wrap=True)
    print_summary(console, report)
    if args.no_html:
        return EXIT_OK
    try:
        path = write_report(args.out, args.html, price_in=args.price_in,
                            price_out=args.price_out)
    except RuntimeError as exc:
        raise CliError(f"{exc} (--no-html prints the summary alone)", EXIT_TOOL_ERROR) from exc
    console.print(f"report: {path}", markup=False)
    return EXIT_OK


def print_summary(console: Any, report: Any) -> None:
    """The run on the terminal: every text from the run printed as text, never markup."""
    from rich.table import Table
    from rich.text import Text

    rate = report.verified_rate
    head = Text(f"{printable(report.out)}: {len(report.tasks)} tasks", style="bold")
    console.print(head)
    rest = " · ".join(f"{o} {report.count(o)}" for o in ("not verified", "done", "failed"))
    shown = f"{100 * rate:.1f}%" if rate is not None else "n/a: no task had a verify command"
    console.print(Text(f"verified {report.count('verified')}/{report.graded} ({shown}) · "
                       + rest))
    if report.replayed:
        console.print(Text(f"{report.replayed} task(s) replayed recorded tokens: not spent, "
                           "no cost"))
    if report.skipped:
        console.print(Text(f"{report.skipped} line(s) of results.jsonl are not results: "
                           "left out", style="yellow"))
    groups = report.groups()
    if groups:
        table = Table(title="failures by reason", title_justify="left", expand=False)
        for name, justify in (("outcome", "left"), ("reason", "left"), ("tasks", "right"),
                              ("e.g.", "left")):
            table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
        for outcome, kind, tasks in groups[:SHOWN]:
            table.add_row(_field(outcome), _field(kind), str(len(tasks)), _field(tasks[0].id))
        console.print(table)
    _repos(console, report)
    _stats(console, report)


def _field(value: object) -> Any:
    """A text from the run folder as rich text: printable, never markup."""
    from rich.text import Text

    return Text(printable(value))


def _repos(console: Any, report: Any) -> None:
    from rich.table import Table

    table = Table(title="repositories", title_justify="left")
    table.add_column("repository", overflow="fold")
    for name in ("tasks", "verified", "graded", "failed", "tokens"):
        table.add_column(name, justify="right")
    for row in report.repos()[:SHOWN]:
        table.add_row(_field(row.repo), str(row.tasks), str(row.verified), str(row.graded),
                      str(row.failed), f"{row.tokens:,}")
    console.print(table)
    more = len(report.repos()) - SHOWN
    if more > 0:
        console.print(f"  and {more} more (the page lists them all)")


def _stats(console: Any, report: Any) -> None:
    from rich.table import Table

    table = Table(title="per finished task", title_justify="left")
    for name in ("", "median", "p90", "max", "total"):
        table.add_column(name, justify="right" if name else "left")
    for name, label, values in report.stats():
        table.add_row(label, *(_show(name, v) for v in values))
    console.print(table)
    if not report.priced:
        console.print("cost: unknown (--price-in/--price-out give the price per million "
                      "tokens)")


def _show(name: str, value: float) -> str:
    if name == "seconds":
        return f"{value:.1f}s"
    if name == "cost":
        return f"${value:,.4f}"
    return f"{int(value):,}"
