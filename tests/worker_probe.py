"""A handler for sandbox.FencedWorker that tries to break out: each function is an attack
run inside the worker's fence. Standard library only at import (an ordinary user's
interpreter may lack the rest)."""

from __future__ import annotations

import ctypes
import os
import socket
import time

EXPECTED_ERRORS = (OSError,)


def echo(fds: list[int], text: str) -> str:
    return text


def read(fds: list[int], path: str) -> str:
    with open(path, "rb") as fh:
        return fh.read(200).decode("utf-8", "replace")


def read_fd(fds: list[int]) -> str:
    with open(f"/proc/self/fd/{fds[0]}", "rb") as fh:
        return fh.read(200).decode("utf-8", "replace")


def write(fds: list[int], path: str) -> str:
    with open(path, "w") as fh:
        fh.write("written by the worker\n")
    return "written"


def connect(fds: list[int], port: int) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        return "connected"


def kill(fds: list[int], pid: int) -> str:
    os.kill(pid, 0)
    return "could signal"


def allocate(fds: list[int], gib: float) -> str:
    block = bytearray(int(gib * 2**30))
    return str(len(block))


def segfault(fds: list[int]) -> str:
    return str(ctypes.string_at(0))


def sleep(fds: list[int], seconds: float) -> str:
    time.sleep(seconds)
    return "slept"


def spin(fds: list[int]) -> str:
    while True:
        pass


def polars_sql(fds: list[int], sql: str) -> str:
    """A table function run straight through polars, as if the SQL check had missed it."""
    import polars as pl

    return str(pl.SQLContext().execute(sql, eager=True))


def calamine(fds: list[int]) -> str:
    """The workbook through fastexcel directly, as if the up-front check had missed it."""
    import fastexcel

    sheet = fastexcel.read_excel(f"/proc/self/fd/{fds[0]}").load_sheet(0, n_rows=10)
    return str(sheet.to_polars().shape)


def polars_parquet(fds: list[int]) -> str:
    import polars as pl

    return str(pl.read_parquet(f"/proc/self/fd/{fds[0]}").shape)


def preview(fds: list[int], **args: object) -> dict[str, object]:
    """A table preview as a worker that lies would answer it: the right name, the wrong
    shape (a row count that is text, a row that is not a list)."""
    return {"path": "t.csv", "format": "csv", "size": 1, "row_count": "many", "rows_read": 1,
            "columns": ["a"], "column_count": 1, "dtypes": ["String"], "rows": ["not a row"],
            "widths": [1]}
