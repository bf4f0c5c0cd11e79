"""Where trials run: in this process, or on Dask workers (a LocalCluster here, or an existing
cluster by address), so a sweep that outgrows one machine runs on many without code changes.
Either way each trial is `trial.simulate` on the same spec, so the results are the same."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable
from typing import Any

from profiler.errors import ScprofError
from whatif.trial import TrialOutcome, TrialSpec, materialize, simulate, simulate_shipped

Progress = Callable[[int, int], None]


class Executor:
    """Runs batches of trials; `workers` <= 1 and no scheduler: in this process."""

    def __init__(self, workers: int = 1, scheduler: str | None = None):
        if workers < 1:
            raise ScprofError(f"--workers: {workers} is below the minimum 1")
        if scheduler is not None and not scheduler.strip():
            raise ScprofError("--scheduler: empty address; give a Dask scheduler's, e.g. tcp://10.0.0.5:8786")
        self.workers, self.scheduler = workers, scheduler
        self._client: Any = None
        self._cluster: Any = None
        self._scratch: tempfile.TemporaryDirectory | None = None

    @property
    def distributed(self) -> bool:
        return self.scheduler is not None or self.workers > 1

    def map(self, specs: list[TrialSpec], progress: Progress | None = None) -> list[TrialOutcome]:
        """Simulate every spec; the outcomes in the specs' order."""
        if not specs:
            return []
        if not self.distributed:
            out = []
            for i, spec in enumerate(specs):
                out.append(simulate(spec))
                if progress:
                    progress(i + 1, len(specs))
            return out
        from distributed import as_completed

        client = self.connect()
        futures = client.map(simulate_shipped, specs, pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        results: list[TrialOutcome | None] = [None] * len(specs)
        for done, future in enumerate(as_completed(futures), 1):
            i = index[future.key]
            results[i] = materialize(future.result(), specs[i].out_dir)
            if progress:
                progress(done, len(specs))
        return [r for r in results if r is not None]

    def connect(self) -> Any:
        """The Dask client, made on first use (a LocalCluster started, or the scheduler reached)."""
        if self._client is None:
            from distributed import Client

            if self.scheduler is not None:
                try:
                    self._client = Client(self.scheduler, timeout="10s")
                except (OSError, TimeoutError, ValueError) as e:
                    raise ScprofError(
                        f"--scheduler {self.scheduler}: cannot reach a Dask scheduler there ({e})"
                    ) from None
            else:
                from whatif.local_cluster import local_cluster

                # the workers' scratch space (Dask's lock files, spilled data), removed at close
                self._scratch = tempfile.TemporaryDirectory(prefix="scprof-dask-")
                self._cluster = local_cluster(self.workers, self._scratch.name)  # 127.0.0.1, TLS, no HTTP
                self._client = Client(self._cluster)
        return self._client

    def close(self) -> None:
        for thing in (self._client, self._cluster):
            if thing is not None:
                with contextlib.suppress(Exception):
                    thing.close()
        self._client = self._cluster = None
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
