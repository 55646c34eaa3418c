"""Rotary position embedding (RoPE) of q or k, forward and backward (NKI 0.7, Trn2), as `frontier.model.gpt.Rotary`:

    per head, x = [x1, x2] (halves of head_dim):   y = [x1 cos + x2 sin,  x2 cos - x1 sin]
    backward (the transposed rotation: the same one with sin negated):  dx = [dy1 cos - dy2 sin, dy2 cos + dy1 sin]

x is [N, H * hd] in HBM: N = B * T tokens in (batch, position) order, heads side by side along the row (the layout of
`q.view(B, T, H, hd)` flattened). cos and sin are the [T, hd / 2] tables (`Rotary.cos[0, :T, 0, :]`): token n is at
position n % T, so N must be a multiple of T. Tables are fp32; x may be fp32 or bf16 (output in x's dtype, fp32 inside).

Tiling: tokens on the partitions, 128 per tile (the last tile takes N % 128), the whole row H * hd along the free dim,
so the rotate-half is a pair of strided views of the tile (x viewed as [rows, H, 2, hd/2]) and nothing crosses
partitions. A tile starting at token r0 needs the table rows (r0 + i) % T: its "phase" r0 % T decides them. Tiles are
processed grouped by phase (lists, not dicts: NKI dict keys must be strings); for each phase the kernel builds, once, two [rows, H, 2, hd/2] tables in SBUF,
    cc = [cos, cos] per head,   ss = [sin, -sin] per head (backward: [-sin, sin]),
so that every tile is  y = x * cc + swap(x) * ss  with swap(x) = [x2, x1] per head. A phase table is filled by DMA,
each table row from HBM at most once per phase; a row it needs again (T < 128: the sequence repeats within a tile)
is copied SBUF -> SBUF by DMA from the partition that already holds it.
HBM: x read once, y written once; table rows read = sum over the distinct phases of min(rows of that phase, T),
which is exactly T rows (each table row once) when T divides 128 (smoke: T = 64) or 128 divides T (T = 2048).

Engines, per 128-token tile: DMA in and out; VectorE x * cc and the final add; GpSimd the two half products
x2 * ss1 and x1 * ss2 (`tensor_tensor` on [rows, H, hd/2] strided views, SBUF only). Per phase: ScalarE 4 H copies
(`activation` copy with scale +-1) replicate cos and +-sin into every head's halves.
SBUF per partition: the two phase tables (2 * H * hd fp32), x, the product and y per tile (3 * H * hd, twice while
the next tile's are allocated). No PSUM, no TensorE.
"""

import nki
import nki.isa as nisa
import nki.language as nl


def _segments(phase, rows, period):
    """How to fill a phase table of `rows` partitions with table rows (phase + i) % period: a list of
    (partition, count, table_row, from_partition): from HBM table_row.. when from_partition < 0, else an SBUF copy of
    partitions from_partition.. of the same tile (rows loaded earlier in it). Pure trace-time code (in the NKI
    language: `where` is a list indexed by table row, -1 where no partition holds it yet)."""
    where = []
    for _ in range(period):
        where.append(-1)
    segs = []
    for p in range(rows):
        j = (phase + p) % period
        src = where[j]
        extended = False
        if len(segs) > 0:
            p0, count, j0, src0 = segs[len(segs) - 1]
            if src0 < 0 and src < 0 and j0 + count == j:
                extended = True
            if src0 >= 0 and src >= 0 and src0 + count == src:
                extended = True
            if extended:
                segs[len(segs) - 1] = (p0, count + 1, j0, src0)
        if not extended:
            segs.append((p, 1, j, src))
        if src < 0:
            where[j] = p
    return segs


def _phase_tables(cos, sin, phase, rows, heads, half, inverse):
    """cc = [cos, cos] and ss = [sin, -sin] ([-sin, sin] when inverse) per head, [rows, heads, 2, half] fp32."""
    period = cos.shape[0]
    ct = nl.ndarray((rows, half), dtype=nl.float32, buffer=nl.sbuf)
    st = nl.ndarray((rows, half), dtype=nl.float32, buffer=nl.sbuf)
    for p, count, j, src in _segments(phase, rows, period):
        if src < 0:
            nisa.dma_copy(dst=ct[p:p + count, :], src=cos[j:j + count, :])
            nisa.dma_copy(dst=st[p:p + count, :], src=sin[j:j + count, :])
        else:
            nisa.dma_copy(dst=ct[p:p + count, :], src=ct[src:src + count, :])
            nisa.dma_copy(dst=st[p:p + count, :], src=st[src:src + count, :])
    cc = nl.ndarray((rows, heads, 2, half), dtype=nl.float32, buffer=nl.sbuf)
    ss = nl.ndarray((rows, heads, 2, half), dtype=nl.float32, buffer=nl.sbuf)
    sign1 = -1.0 if inverse else 1.0
    for h in range(heads):
        for i in range(2):
            nisa.activation(dst=cc[:, h, i, :], op=nl.copy, data=ct)
        nisa.activation(dst=ss[:, h, 0, :], op=nl.copy, data=st, scale=sign1)
        nisa.activation(dst=ss[:, h, 1, :], op=nl.copy, data=st, scale=-sign1)
    return cc, ss


def _find(values, v):
    """The index of v in the list `values`, -1 if absent."""
    for i in range(len(values)):
        if values[i] == v:
            return i
    return -1


def _rope(x, cos, sin, inverse):
    n, width = x.shape
    period, half = cos.shape
    assert sin.shape == cos.shape, "cos and sin tables must have the same shape [T, head_dim / 2]"
    hd = 2 * half
    assert width % hd == 0, f"row width {width} is not a multiple of head_dim {hd}"
    assert n % period == 0, f"{n} tokens are not whole sequences of T = {period} (the tables' rows)"
    heads = width // hd
    pmax = nl.tile_size.pmax
    y = nl.ndarray((n, width), dtype=x.dtype, buffer=nl.shared_hbm)
    phases = []  # the distinct tile phases r0 % T, in order of first appearance
    groups = []  # groups[i]: the tiles (r0, rows) of phases[i]
    ntiles = (n + pmax - 1) // pmax
    cores, core = nl.num_programs(), nl.program_id(0)  # LNC=2: each core rotates half of the tiles
    for t in range(core * ntiles // cores, (core + 1) * ntiles // cores):
        r0 = t * pmax
        k = _find(phases, r0 % period)
        if k < 0:
            phases.append(r0 % period)
            groups.append([])
            k = len(phases) - 1
        groups[k].append((r0, min(pmax, n - r0)))
    for k in range(len(phases)):
        tiles = groups[k]
        rows_max = 0
        for tile in tiles:
            rows_max = max(rows_max, tile[1])
        cc, ss = _phase_tables(cos, sin, phases[k], rows_max, heads, half, inverse)
        for r0, rows in tiles:
            xt = nl.ndarray((rows, heads, 2, half), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=xt, src=x[r0:r0 + rows, :])
            sw = nl.ndarray((rows, heads, 2, half), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=sw[:, :, 0, :], data1=xt[:, :, 1, :], data2=ss[0:rows, :, 0, :], op=nl.multiply,
                               engine=nisa.engine.gpsimd)
            nisa.tensor_tensor(dst=sw[:, :, 1, :], data1=xt[:, :, 0, :], data2=ss[0:rows, :, 1, :], op=nl.multiply,
                               engine=nisa.engine.gpsimd)
            yt = nl.ndarray((rows, heads, 2, half), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=yt, data1=xt, data2=cc[0:rows], op=nl.multiply)
            yo = nl.ndarray((rows, heads, 2, half), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=yo, data1=yt, data2=sw, op=nl.add)
            nisa.dma_copy(dst=y[r0:r0 + rows, :], src=yo)
    return y


@nki.jit
def rope_fwd(x, cos, sin):
    """y[N, H * hd] = x rotated per head by the position's angle (module docstring)."""
    return _rope(x, cos, sin, inverse=False)


@nki.jit
def rope_bwd(dy, cos, sin):
    """dx[N, H * hd] = dy rotated back (the same rotation with sin negated): the gradient of rope_fwd."""
    return _rope(dy, cos, sin, inverse=True)
