"""A pool of one-thread worker processes: independent jobs (runs, benches) side by side, one core each.

Each job runs in a process of its own, spawned (never forked: no torch state is shared) and used once (nothing a
job leaves behind reaches the next), with torch at one thread, so that N workers keep N cores busy and a run's
arithmetic does not depend on how many threads the machine has. A run trained this way records its one thread
(`torch_threads` in its hardware); `frontier.study.replay` allows for the other summation order when it replays
it with more.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from ..errors import UserError


def _one_thread(call):
    fn, job = call
    import torch

    torch.set_num_threads(1)
    return fn(job)


def one_thread_jobs(fn: Callable, jobs: Iterable, workers: int = 2) -> Iterator:
    """`fn(job)` for each of `jobs`, `workers` at a time, each in a fresh spawned process with torch at one thread;
    the results as the jobs finish (not in the order given). `fn` is a module-level function (the spawned process
    imports it by name), and so are the jobs picklable."""
    if workers < 1:
        raise UserError(f"{workers} workers cannot run anything", "pass workers=1 or more")
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(workers, maxtasksperchild=1) as pool:
        yield from pool.imap_unordered(_one_thread, [(fn, job) for job in jobs])
