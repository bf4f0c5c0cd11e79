"""The Dask cluster `tune` starts here listens on 127.0.0.1 for Dask's protocol only, over
mutual TLS: no HTTP endpoint (dashboard, /health, /metrics) in the scheduler or the workers,
which any user of the machine could reach (distributed serves the scheduler's on
127.0.0.1:8787 and each worker's on a random port whatever the arguments), and no comm that
takes work from a client without the cluster's key. whatif/local_cluster.py overrides
distributed's start_http_server to get there; these tests fail if a distributed release
brings an HTTP server back or the comms open up."""

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
    host, _, port = address.removeprefix("tls://").removeprefix("tcp://").rpartition(":")
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


def test_the_local_cluster_runs_only_work_from_holders_of_its_key(tmp_path) -> None:
    """Dask's comms take pickled functions: every comm is mutual TLS with a key made for the
    cluster, so another local user's client (plain TCP, or TLS with credentials of its own)
    cannot submit anything, while ours can."""
    from distributed import Client
    from distributed.security import Security

    marker = tmp_path / "ran"
    with Executor(workers=1) as ex:
        client = ex.connect()
        info = client.scheduler_info()
        assert info["address"].startswith("tls://") and all(a.startswith("tls://") for a in info["workers"])
        assert client.submit(sum, [1, 2]).result() == 3
        host, port = _port(info["address"])
        for address, security in ((f"tcp://{host}:{port}", None), (info["address"], Security.temporary())):
            with pytest.raises((OSError, TimeoutError)):
                other = Client(address, security=security, timeout="3s")
                other.submit(marker.write_text, "x").result(timeout=3)
                other.close()
    assert not marker.exists()


def test_the_local_cluster_leaves_nothing_in_the_temporary_folder(tmp_path, monkeypatch) -> None:
    """Dask's workers keep lock files in a scratch folder (by default `dask-scratch-space` in
    the temporary folder, left there): the executor gives them one of its own and removes it."""
    import tempfile

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    with Executor(workers=1) as ex:
        assert ex.connect().submit(sum, [2, 3]).result() == 5
        assert os.listdir(scratch)  # the workers' scratch folder, while they run
    assert os.listdir(scratch) == []
