"""On-chip memory accounting: which SBUF and PSUM allocations are alive, against the Trn2 capacities.

The rule (simple and conservative): an allocation (`nl.ndarray`, `nl.zeros`, `nl.load`, the result of an `nl.*`
elementwise call) is alive from its creation until the last Python reference to it or to any view of it is gone
(CPython reference counting: the name is rebound in the next loop iteration, `del`eted, or the kernel returns). A
name rebound in a loop therefore holds two allocations for a moment (the new one is made before the old one is
dropped), like double buffering. The compiler frees a tile after its last use, which is never later than this, so the
peak here is never below the compiler's, apart from fragmentation and alignment, which are not modelled.

SBUF: bytes per partition of every live allocation (free elements x itemsize) summed <= 212,984.
PSUM: every allocation takes whole 2 KiB banks and starts on a bank boundary [an assumption]; <= 8 banks alive.
"""

from __future__ import annotations

import itertools
import math
import weakref

from .counts import Counts
from .errors import LimitError
from .limits import PMAX, PSUM_BANK_BYTES, PSUM_BANKS, SBUF_BYTES_PER_PARTITION
from .tensor import MemoryRegion, Storage


class Memory:
    def __init__(self, counts: Counts):
        self.counts = counts
        self.sbuf_bytes = 0
        self.psum_banks = 0
        self._live: dict[int, tuple[MemoryRegion, int, str]] = {}
        self._ids = itertools.count()

    def allocate(self, storage: Storage) -> None:
        buffer, shape = storage.buffer, storage.array.shape
        if not buffer.on_chip:
            return
        name = storage.name or "unnamed"
        if len(shape) < 2:
            raise LimitError(f"on-chip tensor {name!r} of shape {shape}: SBUF/PSUM tiles are at least 2-D "
                             "(dim 0 is the partition dim)")
        if shape[0] > PMAX:
            raise LimitError(f"tile {name!r} of shape {shape}: partition dim {shape[0]} exceeds the {PMAX} "
                             "partitions (nl.tile_size.pmax)")
        per_partition = storage.bytes_per_partition
        if buffer is MemoryRegion.sbuf:
            need = per_partition
            if self.sbuf_bytes + need > SBUF_BYTES_PER_PARTITION:
                raise LimitError(f"SBUF overflow: tile {name!r} needs {need:,} B per partition while live tiles hold "
                                 f"{self.sbuf_bytes:,} B of the {SBUF_BYTES_PER_PARTITION:,} B usable per partition "
                                 f"({self._describe(MemoryRegion.sbuf)})")
            self.sbuf_bytes += need
            self.counts.peak_sbuf_bytes = max(self.counts.peak_sbuf_bytes, self.sbuf_bytes)
        else:
            need = math.ceil(per_partition / PSUM_BANK_BYTES)
            if self.psum_banks + need > PSUM_BANKS:
                raise LimitError(f"PSUM overflow: tile {name!r} needs {need} bank(s) while live tiles hold "
                                 f"{self.psum_banks}: {self.psum_banks + need} banks exceed the {PSUM_BANKS} PSUM "
                                 f"banks (2 KiB each) per partition ({self._describe(MemoryRegion.psum)})")
            self.psum_banks += need
            self.counts.peak_psum_banks = max(self.counts.peak_psum_banks, self.psum_banks)
        key = next(self._ids)
        self._live[key] = (buffer, need, name)
        weakref.finalize(storage, self._release, key)

    def _release(self, key: int) -> None:
        buffer, need, _ = self._live.pop(key)
        if buffer is MemoryRegion.sbuf:
            self.sbuf_bytes -= need
        else:
            self.psum_banks -= need

    def _describe(self, buffer: MemoryRegion) -> str:
        live = [f"{n}:{k}" for b, k, n in self._live.values() if b is buffer]
        return f"{len(live)} live: " + ", ".join(live[:8]) + (", ..." if len(live) > 8 else "")
