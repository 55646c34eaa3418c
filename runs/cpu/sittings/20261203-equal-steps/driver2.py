# The same sitting, second part (2026-12-03 12:53): the baseline at 420 steps on the embedded corpus, seeds 0-2, for
# the ablation's "everything removed" row (`frontier ablate --recipe final --steps 420` then reuses these runs). Two
# one-thread workers, as in driver.py (a first try at torch's two threads beside other processes' load crawled: seed 0
# was at step 360 after 21 minutes and was stopped; its record says interrupted).
import multiprocessing as mp
import time

from driver import job

if __name__ == "__main__":
    with mp.get_context("spawn").Pool(2, maxtasksperchild=1) as pool:
        for line in pool.imap_unordered(job, [("embedded", "baseline", s) for s in (0, 1, 2)]):
            print(time.strftime("%H:%M:%S"), line, flush=True)
