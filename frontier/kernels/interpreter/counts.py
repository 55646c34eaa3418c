"""What one kernel call did, for a cost model: traffic, transfers, FLOPs, and work per engine."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

ENGINES = ("tensor", "vector", "scalar", "gpsimd")


def _per_engine() -> dict[str, int]:
    return dict.fromkeys(ENGINES, 0)


@dataclass
class Counts:
    """Counted per kernel call by the interpreter.

    hbm_read_bytes / hbm_write_bytes: bytes DMA'd out of / into HBM (elements x itemsize of the HBM side).
    dma_transfers / dma_bytes: one per `nisa.dma_copy`, `nl.load`, `nl.store`; bytes read from the source.
    matmul_flops: 2*K*M*N per `nc_matmul` (and per TensorE transpose, an identity matmul).
    instructions[engine]: instructions issued; `activation` with `reduce_res` counts two on ScalarE (reading the
      reduce registers out is an extra instruction, as the ISA docs say).
    elements[engine]: elements of the operand the engine streams (`data`/`src`/`data1`, the moving tile of a
      matmul, `dst` for memset/iota); the register read-out counts its P elements.
    free_elements[engine]: the same per partition (what sets an engine's cycles: the 128 lanes run in parallel).
    peak_sbuf_bytes: the most SBUF bytes per partition held at once; peak_psum_banks: the most PSUM banks.
    """

    hbm_read_bytes: int = 0
    hbm_write_bytes: int = 0
    dma_transfers: int = 0
    dma_bytes: int = 0
    matmul_flops: int = 0
    instructions: dict[str, int] = field(default_factory=_per_engine)
    elements: dict[str, int] = field(default_factory=_per_engine)
    free_elements: dict[str, int] = field(default_factory=_per_engine)
    peak_sbuf_bytes: int = 0
    peak_psum_banks: int = 0

    def instruction(self, engine: str, elements: int, free_elements: int) -> None:
        self.instructions[engine] += 1
        self.elements[engine] += int(elements)
        self.free_elements[engine] += int(free_elements)

    def dma(self, src_bytes: int, src_hbm: bool, dst_bytes: int, dst_hbm: bool) -> None:
        self.dma_transfers += 1
        self.dma_bytes += src_bytes
        self.hbm_read_bytes += src_bytes if src_hbm else 0
        self.hbm_write_bytes += dst_bytes if dst_hbm else 0

    def as_dict(self) -> dict:
        return asdict(self)
