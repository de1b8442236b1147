"""The toolbox's own servers (the rules supervisor, the command proxy) start on first use
and leave nothing behind: stopped when closed, or when their owner is collected."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable

import pytest

from yggdrasil.loki.netproxy import AllowedHosts, NetProxy, ProxyRules
from yggdrasil.loki.sandbox import Supervisor


def _proxy() -> tuple[object, Callable[[], str], Callable[[], None]]:  # (owner, folder, close)
    proxy = NetProxy(ProxyRules(AllowedHosts(["example.com"])))
    return proxy, lambda: os.path.dirname(proxy.control_path), proxy.close


def _supervisor() -> tuple[object, Callable[[], str], Callable[[], None]]:
    try:
        supervisor = Supervisor()
        session = supervisor.session()
    except OSError as exc:  # no seccomp user notification here
        pytest.skip(f"the supervisor cannot start here: {exc}")
    session.close()
    return supervisor, lambda: supervisor._server.get().folder, supervisor.close


@pytest.mark.parametrize("make", [_proxy, _supervisor], ids=["proxy", "supervisor"])
def test_started_once_and_gone_when_closed(make: Callable[..., tuple]) -> None:
    _, where, close = make()
    first = where()
    assert os.path.exists(first) and where() == first  # one server, started once
    close()
    assert not os.path.exists(first)


@pytest.mark.parametrize("make", [_proxy, _supervisor], ids=["proxy", "supervisor"])
def test_gone_when_the_owner_is_collected(make: Callable[..., tuple]) -> None:
    owner, where, close = make()
    place = where()
    del owner, where, close
    gc.collect()
    assert not os.path.exists(place)
