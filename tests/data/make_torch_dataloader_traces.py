"""Make the committed PyTorch traces of a DataLoader-bound training loop and of the same loop with
DataLoader worker processes (for the Chrome trace JSON import, the input-bound finding and compare).

A small MLP trained with SGD on the CPU (torch.set_num_threads(1)), fed by a Dataset whose
`__getitem__` reads a sample (a 0.5 ms wait, as on storage or the network) and decodes it in
numpy; batches of 64 go through PyTorch's default collate:

- dataloader_bound: `DataLoader(num_workers=0)`: the training loop loads every batch itself, in
  `enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`, so each step waits ~32 ms for its
  input before ~15 ms of compute;
- dataloader_workers: the same with `num_workers=4` (prefetch_factor 2): worker processes load
  batches ahead and the loop only takes them.

torch.profiler records CPU activity with a schedule (wait 2, warmup 2, active 12 steps), so each
trace holds 12 `ProfilerStep#N` steps; its Chrome trace JSON (what TensorBoard's plugin, HTA and
Perfetto read) is gzip'd next to this script as `<name>.pt.trace.json.gz`. The script measures
each step's wall time (time.perf_counter around `prof.step()`'s steps) into `<name>.steps.json`,
the reference the tests compare scprof's step times with.

Not part of the package or the test run (torch is not a dependency). To remake:

    python3 -m venv /tmp/torch-venv && /tmp/torch-venv/bin/pip install torch==2.13.0 numpy
    /tmp/torch-venv/bin/python tests/data/make_torch_dataloader_traces.py
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile, schedule
from torch.utils.data import DataLoader, Dataset

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "torch_dataloader")
READ_WAIT_S = 0.0005  # per sample
FEATURES, HIDDEN, CLASSES, BATCH = 256, 1024, 10, 64
WAIT, WARMUP, ACTIVE = 2, 2, 12


class SlowDataset(Dataset):
    """Samples read and decoded on the host: a wait for the read, then numpy work."""

    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, i: int) -> tuple[np.ndarray, int]:
        time.sleep(READ_WAIT_S)
        rng = np.random.default_rng(i)
        x = rng.standard_normal(FEATURES).astype(np.float32)
        x = (x - x.mean()) / (x.std() + 1e-6)
        return x, int(i % CLASSES)


def train(name: str, workers: int) -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(
        torch.nn.Linear(FEATURES, HIDDEN),
        torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, HIDDEN),
        torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, CLASSES),
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(SlowDataset(), batch_size=BATCH, num_workers=workers, prefetch_factor=2 if workers else None)
    tmp = tempfile.mkdtemp(prefix="torchtrace-")
    steps_s: list[float] = []

    def save(prof) -> None:
        prof.export_chrome_trace(os.path.join(tmp, "trace.json"))

    it = iter(loader)
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE),
        on_trace_ready=save,
    ) as prof:
        for _ in range(WAIT + WARMUP + ACTIVE):
            t0 = time.perf_counter()
            x, y = next(it)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step()
            steps_s.append(time.perf_counter() - t0)
    del it
    with (
        open(os.path.join(tmp, "trace.json"), "rb") as f,
        gzip.open(os.path.join(OUT, f"{name}.pt.trace.json.gz"), "wb") as g,
    ):
        shutil.copyfileobj(f, g)
    shutil.rmtree(tmp)
    with open(os.path.join(OUT, f"{name}.steps.json"), "w") as f:
        json.dump({"step_s": steps_s[WAIT + WARMUP :], "workers": workers, "torch": torch.__version__}, f, indent=1)
    mean_ms = 1e3 * sum(steps_s[WAIT + WARMUP :]) / ACTIVE
    print(f"{name}: {mean_ms:.1f} ms per step over {ACTIVE} profiled steps", file=sys.stderr)


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    train("dataloader_bound", 0)
    train("dataloader_workers", 4)


if __name__ == "__main__":
    main()
