"""What one kernel call did, for a cost model and for the compiler's instruction limit.

Two instruction counts are kept. `instructions` are the instructions executed (a dynamic loop's body once per
iteration): the work, for the cost model. `static_instructions` are the instructions the kernel's specialization
emits, the program the compiler has to hold (EBVF030 "the number of instructions generated exceeds the limit"):
every unrolled Python loop iteration counts, a compiled loop's body (`nl.fori_loop`) counts once.
DMA transfers are instructions too and count in both under "dma".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

ENGINES = ("tensor", "vector", "scalar", "gpsimd")
STATIC_ENGINES = ENGINES + ("dma",)

# Our budget for `static_instructions` per kernel call. The Neuron docs give no figure (EBVF030 only says "the
# number of instructions generated exceeds the limit"); 20,000 is this project's own conservative choice, well inside
# what unrolled kernels are built at, so that a kernel stays compilable whatever the real limit is above it. A
# kernel whose count at the trn2 shapes exceeds it must move its long loops to `nl.fori_loop`.
STATIC_INSTRUCTION_LIMIT = 20_000


def _per_engine() -> dict[str, int]:
    return dict.fromkeys(ENGINES, 0)


def _per_static_engine() -> dict[str, int]:
    return dict.fromkeys(STATIC_ENGINES, 0)


@dataclass
class Counts:
    """Counted per kernel call by the interpreter.

    hbm_read_bytes / hbm_write_bytes: bytes DMA'd out of / into HBM (elements x itemsize of the HBM side).
    dma_transfers / dma_bytes: one per `nisa.dma_copy`, `nl.load`, `nl.store`; bytes read from the source.
    matmul_flops: 2*K*M*N per `nc_matmul` (and per TensorE transpose, an identity matmul).
    instructions[engine]: instructions executed; `activation` with `reduce_res` counts two on ScalarE (reading the
      reduce registers out is an extra instruction, as the ISA docs say).
    static_instructions[engine or "dma"]: instructions emitted (module docstring); `static_total` sums them.
    elements[engine]: elements of the operand the engine streams (`data`/`src`/`data1`, the moving tile of a
      matmul, `dst` for memset/iota); the register read-out counts its P elements.
    free_elements[engine]: the same per partition (what sets an engine's cycles: the 128 lanes run in parallel).
    peak_sbuf_bytes: the most SBUF bytes per partition held at once; peak_psum_banks: the most PSUM banks.
    dynamic_loops: dynamic loops entered (each counted once however often it runs).
    lnc_conflicts: at LNC=2, HBM bytes one core wrote that the other read or wrote (differently) between the same two
      barriers: a race (lnc.py); 0 for a correct kernel.
    A call at LNC=2 counts both cores (`combine`): work and traffic add up, emitted instructions and memory peaks are
    the larger core's (each core holds its own program and SBUF); `per_core` keeps each.
    """

    hbm_read_bytes: int = 0
    hbm_write_bytes: int = 0
    dma_transfers: int = 0
    dma_bytes: int = 0
    matmul_flops: int = 0
    instructions: dict[str, int] = field(default_factory=_per_engine)
    static_instructions: dict[str, int] = field(default_factory=_per_static_engine)
    elements: dict[str, int] = field(default_factory=_per_engine)
    free_elements: dict[str, int] = field(default_factory=_per_engine)
    peak_sbuf_bytes: int = 0
    peak_psum_banks: int = 0
    dynamic_loops: int = 0
    lnc_conflicts: int = 0

    @property
    def static_total(self) -> int:
        return sum(self.static_instructions.values())

    def instruction(self, engine: str, elements: int, free_elements: int, emitted: bool = True) -> None:
        self.instructions[engine] += 1
        self.elements[engine] += int(elements)
        self.free_elements[engine] += int(free_elements)
        if emitted:
            self.static_instructions[engine] += 1

    def dma(self, src_bytes: int, src_hbm: bool, dst_bytes: int, dst_hbm: bool, emitted: bool = True) -> None:
        self.dma_transfers += 1
        self.dma_bytes += src_bytes
        self.hbm_read_bytes += src_bytes if src_hbm else 0
        self.hbm_write_bytes += dst_bytes if dst_hbm else 0
        if emitted:
            self.static_instructions["dma"] += 1

    @classmethod
    def combine(cls, cores: list["Counts"]) -> "Counts":
        out = cls()
        for c in cores:
            for f in ("hbm_read_bytes", "hbm_write_bytes", "dma_transfers", "dma_bytes", "matmul_flops"):
                setattr(out, f, getattr(out, f) + getattr(c, f))
            for f in ("instructions", "elements", "free_elements"):
                for k, v in getattr(c, f).items():
                    getattr(out, f)[k] += v
            for k, v in c.static_instructions.items():
                out.static_instructions[k] = max(out.static_instructions[k], v)
            out.peak_sbuf_bytes = max(out.peak_sbuf_bytes, c.peak_sbuf_bytes)
            out.peak_psum_banks = max(out.peak_psum_banks, c.peak_psum_banks)
            out.dynamic_loops = max(out.dynamic_loops, c.dynamic_loops)
        out.per_core = list(cores)
        return out

    def as_dict(self) -> dict:
        return {**asdict(self), "static_total": self.static_total}
