"""The streaming writer's reader thread: the next stream window is fetched and sorted while one is encoded.

A bounded hand-off (at most `depth` windows alive) so that memory follows the window, not the run.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable


def _prefetch(items: Iterable, depth: int = 2):
    """The items, made ahead in a thread (the next window is fetched and sorted while one is encoded).

    At most `depth` items exist at a time, counting the one the consumer holds, so memory
    stays bounded; the iterable is drained by the thread alone, and the thread is joined
    before this generator returns or raises.
    """
    q: queue.Queue = queue.Queue()
    slots = threading.Semaphore(depth)
    stop = threading.Event()
    done = object()

    def run():
        try:
            it = iter(items)
            while True:
                while not slots.acquire(timeout=0.1):
                    if stop.is_set():
                        return
                if stop.is_set():
                    return
                item = next(it, done)
                q.put(item)
                if item is done:
                    return
        except BaseException as e:  # handed to the consumer
            q.put(e)

    t = threading.Thread(target=run, name="scprof-export-reader", daemon=True)
    t.start()
    try:
        held = False
        while True:
            if held:  # the consumer is done with the item it held
                slots.release()
            item = q.get()
            held = True
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
            item = None
    finally:
        stop.set()
        while t.is_alive():
            try:
                q.get_nowait()
            except queue.Empty:
                t.join(0.05)
