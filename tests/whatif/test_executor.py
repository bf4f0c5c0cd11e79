"""The Dask cluster `tune` starts here listens on 127.0.0.1 for Dask's protocol only: no HTTP
endpoint (dashboard, /health, /metrics) in the scheduler or the workers, which any user of the
machine could reach (before issue 37: the scheduler's on 127.0.0.1:8787, each worker's on a
random port). whatif/local_cluster.py overrides distributed's start_http_server to get there;
this test fails if a distributed release brings an HTTP server back."""

from __future__ import annotations

import os

import psutil
import pytest

from profiler.errors import ScprofError
from whatif.executor import Executor


def _listening(pid: int) -> set[tuple[str, int]]:
    """(address, port) of the TCP sockets listening in `pid` and its descendants."""
    me = psutil.Process(pid)
    out = set()
    for proc in [me, *me.children(recursive=True)]:
        try:
            conns = proc.net_connections(kind="tcp")
        except psutil.NoSuchProcess:
            continue
        out |= {(c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN}
    return out


def _port(address: str) -> tuple[str, int]:
    host, _, port = address.removeprefix("tcp://").rpartition(":")
    return host, int(port)


def test_the_local_cluster_serves_no_http() -> None:
    before = _listening(os.getpid())
    with Executor(workers=2) as ex:
        client = ex.connect()
        assert client.submit(sum, [1, 2]).result() == 3  # the cluster works
        info = client.scheduler_info()
        dask = {_port(info["address"])}  # the scheduler's, each worker's and each nanny's comm
        for addr, w in info["workers"].items():
            dask |= {_port(addr), _port(w["nanny"])}
        opened = _listening(os.getpid()) - before
    assert len(info["workers"]) == 2
    assert opened == dask, f"listening besides Dask's comms: {sorted(opened - dask)}"
    assert all(host == "127.0.0.1" for host, _ in opened)
    assert "dashboard" not in info["services"] and all(
        "dashboard" not in w["services"] for w in info["workers"].values()
    )


@pytest.mark.parametrize("address", ["", "  "])
def test_an_empty_scheduler_address_is_one_line(address: str) -> None:
    with pytest.raises(ScprofError, match=r"^--scheduler: empty address"):
        Executor(scheduler=address)
