"""Running the `loki` command on this checkout's source: in this process (``loki``), or
as a real subprocess (``loki_process``) where the process is what a test is about (the
entry point, a terminal, stdin, signals, what outlives the command)."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
# seconds: a guard against a hang, not a timing (a fleet rerun took over 60 s on a machine
# running several suites at once)
GUARD = 300


# What keeps a child of a test apart from the developer's own files (set by conftest for
# the session): its cache (kept outputs: every toolbox sweeps their folder, ~0.3 s of CPU
# on a cache of 34,000 old sessions), its settings, its state; no language servers.
ISOLATION = ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "LOKI_STATE_DIR",
             "LOKI_DIAGNOSTICS__DEFAULT_SERVERS")


def isolated() -> dict[str, str]:
    """The suite's isolation variables, for a child started with an environment made from
    scratch (the rest of os.environ left out on purpose)."""
    return {name: os.environ[name] for name in ISOLATION if name in os.environ}


@contextmanager
def interruptible() -> Iterator[None]:
    """Children started inside get Ctrl-C's default action, as a terminal's foreground job
    does: a suite started in the background of a shell without job control (``cmd &`` in
    a script, ``nohup``) has SIGINT ignored, every process it starts inherits that, and a
    test of what Ctrl-C does to ``loki do`` then sees nothing happen."""
    before = signal.getsignal(signal.SIGINT)
    if before is not signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def child_env(tmp_path: Path) -> dict[str, str]:
    """Our source first on the path; a system temp dir apart from the root, so that
    existing files in the root count as real assets and edits to them are gated."""
    scratch = tmp_path / "system-tmp"
    scratch.mkdir(exist_ok=True)
    # no COLUMNS (pytest's workers may set it): a child's stdout is a pipe, as in a script
    inherited = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return {**inherited, "PYTHONPATH": str(SRC), "TMPDIR": str(scratch),
            "LOKI_STATE_DIR": str(tmp_path / "loki-state")}  # transcripts of `loki do` runs


def loki_process(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `python -m yggdrasil.loki ARGS` with stdin that is not a terminal."""
    return subprocess.run([sys.executable, "-m", "yggdrasil.loki", *args],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          env=child_env(tmp_path), timeout=GUARD)


def loki(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """What ``loki_process`` gives, from the CLI's ``main`` called in this process (a
    Python start-up and the CLI's imports saved, ~0.4 s of CPU a call): the same
    environment (child_env's TMPDIR and state folder, no COLUMNS), stdin from /dev/null,
    stdout and stderr pipes' text (strict UTF-8; stderr backslash-escapes what it cannot
    encode, as Python's own does), the exit code ``main`` returns or exits with."""
    from yggdrasil.loki.cli import main

    out, err = _pipe("strict"), _pipe("backslashreplace")
    with _as_a_child(tmp_path), open(os.devnull) as stdin:
        saved = sys.stdin, sys.stdout, sys.stderr
        sys.stdin, sys.stdout, sys.stderr = stdin, out, err
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's usage errors and --help
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if isinstance(exc.code, str):
                err.write(exc.code + "\n")
        finally:
            sys.stdin, sys.stdout, sys.stderr = saved
    return subprocess.CompletedProcess([sys.executable, "-m", "yggdrasil.loki", *args],
                                       code, _text(out), _text(err))


def _pipe(errors: str) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors=errors, write_through=True)


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue().decode("utf-8")


@contextmanager
def _as_a_child(tmp_path: Path) -> Iterator[None]:
    """child_env's variables in os.environ (and tempfile's cached folder), the signal
    handlers a run may set (``loki do`` catches SIGTERM) put back afterwards."""
    env = child_env(tmp_path)
    # only the variables that differ are set, and put back after: os.environ is never
    # empty for another thread of this process starting a child meanwhile
    changed = {k for k in set(env) | set(os.environ) if env.get(k) != os.environ.get(k)}
    saved_env = {k: os.environ.get(k) for k in changed}
    saved_signals = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    saved_tempdir = tempfile.tempdir
    _set(os.environ, {k: env.get(k) for k in changed})
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    try:
        yield
    finally:
        _set(os.environ, saved_env)
        tempfile.tempdir = saved_tempdir
        for number, handler in saved_signals.items():
            signal.signal(number, handler)


def _set(environ: os._Environ[str], values: dict[str, str | None]) -> None:
    for name, value in values.items():
        if value is None:
            environ.pop(name, None)
        else:
            environ[name] = value
