"""On-chip memory accounting: which SBUF and PSUM allocations are alive, against the Trn2 capacities.

The rule (simple and conservative): an allocation (`nl.ndarray`, `nl.zeros`, `nl.load`, the result of an `nl.*`
elementwise call) is alive from its creation until the last Python reference to it or to any view of it is gone
(CPython reference counting: the name is rebound in the next loop iteration, the helper that made it returns, or the
kernel returns). A name rebound in a loop therefore holds two allocations for a moment (the new one is made before the
old one is dropped), like double buffering. The compiler frees a tile after its last use, which is never later than
this, so the peak here is never below the compiler's, apart from fragmentation, which is not modelled.

SBUF: bytes per partition of every live allocation (free elements x itemsize) summed <= 212,984.

PSUM: how the compiler places PSUM tensors is undocumented (`tile_size.psum_min_align` exists, its value is not
given). Both worst cases are taken:
- capacity: every allocation takes whole 2 KiB banks (its bytes rounded up), <= 8 banks alive;
- placement: allocations are packed as tightly as possible, each at the lowest byte offset of the partition's 16 KiB
  where it fits (first fit, 4-byte granules), so a tile that is not a whole number of banks shifts the ones after
  it off the bank boundaries. A matmul or TensorE transpose whose output would then cross a bank boundary is refused
  (isa.py). A kernel that allocates every PSUM tile as whole banks is safe under any placement.
"""

from __future__ import annotations

import itertools
import math
import weakref

from .counts import Counts
from .errors import LimitError
from .limits import PMAX, PSUM_BANK_BYTES, PSUM_BANKS, SBUF_BYTES_PER_PARTITION
from .tensor import MemoryRegion, Storage

PSUM_BYTES = PSUM_BANKS * PSUM_BANK_BYTES
GRANULE = 4


class Memory:
    def __init__(self, counts: Counts):
        self.counts = counts
        self.sbuf_bytes = 0
        self.psum_banks = 0
        self._live: dict[int, tuple[MemoryRegion, int, str]] = {}
        self._psum_spans: dict[int, tuple[int, int]] = {}  # key -> (first byte, end byte) of live PSUM tiles
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
        key = next(self._ids)
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
            storage.psum_offset = self._place(per_partition, name)
            self._psum_spans[key] = (storage.psum_offset, storage.psum_offset + per_partition)
        self._live[key] = (buffer, need, name)
        weakref.finalize(storage, self._release, key)

    def _place(self, size: int, name: str) -> int:
        """The lowest byte offset where `size` bytes fit between the live PSUM tiles (tightest packing)."""
        size = math.ceil(size / GRANULE) * GRANULE
        at = 0
        for first, end in sorted(self._psum_spans.values()):
            if at + size <= first:
                break
            at = max(at, math.ceil(end / GRANULE) * GRANULE)
        if at + size > PSUM_BYTES:
            raise LimitError(f"PSUM fragmented: tile {name!r} ({size:,} B per partition) finds no contiguous room "
                             f"between the live tiles ({self._describe(MemoryRegion.psum)}); allocate PSUM tiles "
                             "once, in whole banks, before the loops that reuse them")
        return at

    def _release(self, key: int) -> None:
        buffer, need, _ = self._live.pop(key)
        if buffer is MemoryRegion.sbuf:
            self.sbuf_bytes -= need
        else:
            self.psum_banks -= need
            self._psum_spans.pop(key)

    def _describe(self, buffer: MemoryRegion) -> str:
        live = [f"{n}:{k}" for b, k, n in self._live.values() if b is buffer]
        return f"{len(live)} live: " + ", ".join(live[:8]) + (", ..." if len(live) > 8 else "")
