"""The Dask cluster `tune` starts on this machine: LocalCluster's spec (processes, one thread
each, on 127.0.0.1), but with no HTTP server anywhere and its comms behind mutual TLS.

Dask's own comm ports (scheduler, nannies, workers) take pickled functions from whoever
connects: on plain TCP any user of the machine could run code as us during a `tune`. Here
every comm is TLS with a throwaway CA and key made in memory for this cluster
(`Security.temporary()`, which needs `cryptography`) and each side requires the other's
certificate, so a connection without that key fails its handshake before anything is read.

distributed starts an HTTP server in every scheduler and worker whatever the arguments:
`dashboard_address=None` only moves the scheduler's to 127.0.0.1:8787 and the workers' to
random ports (Scheduler.__init__ and Worker.start_unsafe call `ServerNode.start_http_server`
unconditionally, distributed 2024.8 to 2026.8). Those endpoints (health, metrics, task and
worker info) are reachable by every user of the machine and nothing here needs them, so the
scheduler and worker classes below skip that call. This overrides a method of distributed's
internals: tests/whatif/test_executor.py lists the listening sockets of a running cluster and
fails if an HTTP server comes back (or if the override stops the cluster from working).

Imported only when a cluster starts (it imports distributed).
"""

from __future__ import annotations

import logging
from typing import Any

from distributed import Nanny, Scheduler, SpecCluster, Worker
from distributed.security import Security
from distributed.worker_memory import parse_memory_limit

HOST = "127.0.0.1"


class NoHttpScheduler(Scheduler):
    """A Scheduler that serves no HTTP (no dashboard, no /health, no /metrics)."""

    def start_http_server(self, *args: Any, **kwargs: Any) -> None:
        return None


class NoHttpWorker(Worker):
    """A Worker that serves no HTTP."""

    def start_http_server(self, *args: Any, **kwargs: Any) -> None:
        return None


def local_cluster(workers: int, scratch_dir: str) -> SpecCluster:
    """`workers` worker processes (one thread each: the emulator holds the GIL) and a scheduler,
    all listening on 127.0.0.1 for Dask's own protocol only, over mutual TLS with credentials
    that exist only in this process and the cluster's (the client gets them from the cluster).
    The scheduler and workers keep their scratch files (Dask's locks, spilled data) in `scratch_dir`."""
    security = Security.temporary()
    share = parse_memory_limit("auto", 1, workers, logger=logging.getLogger(__name__))  # LocalCluster's per worker
    worker = {
        "cls": Nanny,
        "options": {
            "host": HOST,
            "nthreads": 1,
            "dashboard": False,
            "dashboard_address": None,
            "silence_logs": logging.ERROR,
            "memory_limit": share,
            "worker_class": NoHttpWorker,
            "local_directory": scratch_dir,
            "security": security,
            "protocol": "tls",
        },
    }
    scheduler = {
        "cls": NoHttpScheduler,
        "options": {
            "host": HOST,
            "port": 0,
            "dashboard": False,
            "dashboard_address": None,
            "security": security,
            "protocol": "tls",
            "local_directory": scratch_dir,
        },
    }
    return SpecCluster(
        scheduler=scheduler,
        workers=dict.fromkeys(range(workers), worker),
        worker=worker,
        silence_logs=logging.ERROR,
        security=security,
    )
