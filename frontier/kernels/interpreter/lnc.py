"""Logical NeuronCores: one kernel call on the two physical cores of an LNC=2 logical core, sharing HBM.

A kernel launched at LNC=2 is specialized once per physical core ("a NEFF compiled for LNC=2 contains PNC-specific
instructions for each of the two PNCs"; nki/get-started/about/lnc.rst): `nl.program_id(0)` is 0 or 1 and
`nl.num_programs()` is 2 at specialization time, so a kernel divides its work with plain Python on them. Each core
has its own SBUF, PSUM, engines and counts (a `Machine` each); the HBM inputs and every `nl.ndarray(...,
buffer=nl.shared_hbm)` are shared: the k-th shared allocation of one core's program is the same tensor as the k-th of
the other's (the programs are "the same", the docs require, so they allocate alike; a shape or dtype that differs is
refused). `nisa.core_barrier(data, (0, 1))` is the documented way for the cores to see each other's writes.

Between two barriers the cores run concurrently and nothing orders their HBM accesses. The interpreter runs such an
epoch one core after the other, each from the HBM as it was when the epoch began, and only then merges what each
wrote (core 1's writes applied after core 0's). So a core never sees the other's writes of the same epoch, the
outcome the hardware allows when both run at once: a read-add-write of the same HBM by both cores loses one of the
two updates, and the result is wrong, as it can be on the chip. Every such access is also counted
(`Counts.lnc_conflicts`: bytes one core wrote that the other read, or wrote with a different value, in the same
epoch), so a test can tell a racy kernel from a correct one without knowing its values.

Compiled loops (`nl.fori_loop`, `nl.while_loop`) are dynamic control flow, and "if you use dynamic control flow, and
this control-flow is different on the different cores, then the behavior is undefined" (lnc.rst, Final Notes): each
core records the trip counts of the compiled loops it runs, in order, and a call whose cores ran different ones (a
loop more, or a different count) is refused (`Group.check_loops`). Straight-line code may differ between the cores:
the compiler specializes each core's program.

The cores run in two threads that take turns (never at the same time); a barrier or the end of the program ends a
core's turn. A core that ends while the other waits at a barrier, or a barrier with other cores than (0, 1), is
refused.
"""

from __future__ import annotations

import threading

import numpy as np

from .errors import KernelError
from .tensor import MemoryRegion, Storage


class Group:
    """The shared state of the cores of one LNC=2 kernel call (module docstring)."""

    def __init__(self, lnc: int, trace: bool):
        self.lnc = lnc
        self.trace = trace
        self.storages: list[Storage] = []  # every HBM storage the cores share: inputs, then shared allocations
        self.shared: list[Storage] = []  # the shared allocations, in program order
        self._next = [0] * lnc  # per core: the index of its next shared allocation
        self.conflicts = 0  # bytes accessed by both cores in one epoch (module docstring)
        self._epoch_start: dict[int, np.ndarray] = {}
        self._writes: dict[int, np.ndarray] = {}
        self._reads: dict[int, np.ndarray] = {}
        self._go = [threading.Semaphore(0) for _ in range(lnc)]
        self._turn_over = threading.Semaphore(0)
        self.state = ["ready"] * lnc  # ready / barrier / done / failed

    # ---------------------------------------------------------------------------------------------- HBM
    def add_input(self, storage: Storage) -> None:
        self.storages.append(storage)

    def shared_storage(self, core: int, shape, dtype, name: str) -> Storage:
        k = self._next[core]
        self._next[core] += 1
        if k < len(self.shared):
            s = self.shared[k]
            if s.array.shape != tuple(shape) or s.array.dtype != np.dtype(dtype):
                raise KernelError(f"shared HBM allocation {k} is {s.array.shape} {s.array.dtype} on one core and "
                                  f"{tuple(shape)} {np.dtype(dtype)} on core {core}: at LNC=2 both cores' programs "
                                  "must allocate the same shared tensors")
            return s
        s = Storage(tuple(shape), dtype, MemoryRegion.shared_hbm, name, fill=not self.trace)
        self.shared.append(s)
        self.storages.append(s)
        if not self.trace:
            self._epoch_start[id(s)] = s.array.copy()  # what a core that has not allocated it yet would find
        return s

    def access(self, view, write: bool) -> None:
        """Record that the running core read or wrote the HBM view (a Tensor) in this epoch."""
        if self.trace:
            return
        masks = self._writes if write else self._reads
        base = view.storage.array
        mask = masks.get(id(view.storage))
        if mask is None:
            mask = masks[id(view.storage)] = np.zeros(base.size, np.bool_)
        data = view._np
        strides = tuple(s // base.itemsize for s in data.strides)
        np.lib.stride_tricks.as_strided(mask[view._element_offset():], data.shape, strides)[...] = True

    # ---------------------------------------------------------------------------------------------- turns
    def barrier(self, core: int) -> None:
        """Called on core `core`'s thread: end its turn at a barrier and wait for the next epoch."""
        self.state[core] = "barrier"
        self._turn_over.release()
        self._go[core].acquire()

    def run(self, bodies) -> list:
        """Run bodies[c]() as core c's program (module docstring); their return values, per core."""
        results, errors = [None] * self.lnc, [None] * self.lnc

        def thread(c):
            self._go[c].acquire()
            try:
                results[c] = bodies[c]()
                self.state[c] = "done"
            except BaseException as e:  # re-raised on the caller's thread
                errors[c] = e
                self.state[c] = "failed"
            self._turn_over.release()

        threads = [threading.Thread(target=thread, args=(c,), daemon=True) for c in range(self.lnc)]
        for t in threads:
            t.start()
        try:
            while True:
                self._epoch()
                failed = [e for e in errors if e is not None]
                if failed:
                    raise failed[0]
                if all(s == "done" for s in self.state):
                    break
                if any(s == "done" for s in self.state):
                    raise KernelError("nisa.core_barrier: one core reached a barrier the other never reached (at "
                                      "LNC=2 both cores' programs must run the same barriers)")
        finally:
            for c, t in enumerate(threads):  # a core left waiting (after an error) is released to finish
                while t.is_alive():
                    self._go[c].release()
                    t.join(timeout=0.05)
        return results

    def check_loops(self, loops: list[list[tuple[str, int | None]]]) -> None:
        """Refuse a call whose cores ran different compiled loops (module docstring); loops[c] is core c's list of
        (API, trip count), a None count (a while_loop in a trace) matching any."""
        first = loops[0]
        for c, other in enumerate(loops[1:], 1):
            for k in range(max(len(first), len(other))):
                a = first[k] if k < len(first) else None
                b = other[k] if k < len(other) else None
                if a is not None and b is not None and a[0] == b[0] and None in (a[1], b[1]):
                    continue
                if a != b:
                    said = [f"core {i}: " + (f"{x[0]} of {x[1]} iterations" if x else "no such loop")
                            for i, x in ((0, a), (c, b))]
                    raise KernelError(f"compiled loop {k + 1} differs between the cores of an LNC=2 call "
                                      f"({'; '.join(said)}): dynamic control flow that differs between the "
                                      "cores is undefined (LNC overview); give every core the same trip counts "
                                      "and leave the rest of a core's share to straight-line code")

    def _epoch(self) -> None:
        start = {} if self.trace else {id(s): s.array.copy() for s in self.storages}
        self._epoch_start = start
        after, writes, reads = [], [], []
        for c in range(self.lnc):
            if self.state[c] in ("done", "failed"):
                continue
            if not self.trace:
                for s in self.storages:
                    np.copyto(s.array, self._epoch_start[id(s)])
            self._writes, self._reads = {}, {}
            self.state[c] = "running"
            self._go[c].release()
            self._turn_over.acquire()
            if self.state[c] == "failed":
                return
            after.append({id(s): s.array.copy() for s in self.storages} if not self.trace else {})
            writes.append(self._writes)
            reads.append(self._reads)
        if self.trace:
            return
        for s in self.storages:
            key, flat = id(s), s.array.reshape(-1)
            np.copyto(s.array, self._epoch_start[key])
            for a, w in zip(after, writes):
                if key in w:
                    flat[w[key]] = a[key].reshape(-1)[w[key]]
            self._count_conflicts(s, after, writes, reads)

    def _count_conflicts(self, s: Storage, after, writes, reads) -> None:
        key, size = id(s), s.array.itemsize
        if len(writes) < 2:
            return
        w0, w1 = writes[0].get(key), writes[1].get(key)
        r0, r1 = reads[0].get(key), reads[1].get(key)
        if w0 is not None and w1 is not None:
            both = w0 & w1
            if both.any():
                v0, v1 = after[0][key].reshape(-1)[both], after[1][key].reshape(-1)[both]
                differ = (v0.view(np.uint8).reshape(-1, size) != v1.view(np.uint8).reshape(-1, size)).any(axis=1)
                self.conflicts += int(np.count_nonzero(differ)) * size
        for w, r in ((w0, r1), (w1, r0)):
            if w is not None and r is not None:
                self.conflicts += int(np.count_nonzero(w & r)) * size
