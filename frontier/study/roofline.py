"""A roofline cost model of one training step on one NeuronCore-v3 (Trn2): **predicted, not measured**.

What is counted (nothing is hand-derived):

- The step itself: the model's forward and backward and the optimiser step of a `RunConfig`, run on the `meta`
  device (shapes only, no data) under a `TorchDispatchMode` that sees every aten op and every `frontier::` fused op
  as it is dispatched (`trace_step`).
- The PyTorch reference of a fused op: its body (`frontier.kernels.reference`) run on meta tensors under the same
  mode, so that each aten op it issues is one unit. On a device without fusion each aten op is its own round trip
  to HBM: it reads its inputs and writes its output (`aten_unit`). FLOPs of matmuls come from
  `torch.utils.flop_counter`'s registry; every other op streams max(inputs, output) elements through VectorE
  (ScalarE for transcendental functions).
- The fused NKI kernel: the kernel's own source run once by the project's interpreter on random tensors of the
  same shapes, which counts its HBM bytes, DMA transfers, matmul FLOPs and per-engine instructions and elements
  (`frontier.kernels.interpreter.Counts`). One run per distinct call signature; Newton-Schulz on a stack of equal
  matrices counts one matrix and multiplies.
- Glue that is not a fused op (the q/k/v/out projections, residual adds, the embedding, Muon's momentum) counts the
  same aten way in both columns. Attention is the vendor's flash kernel in both columns, modelled (`attention_unit`):
  FLOPs from flop_counter's SDPA formula halved for the causal mask, exp of half the score matrix on ScalarE (the
  backward recomputes it), and one read of q, k, v and one write of the output (backward: q, k, v, o, dO in, dQ, dK,
  dV out).

The model (`Peaks`, figures of `shared/reference/nki.md`; `[I]` marks an assumption where the docs give none):

    t_TensorE = matmul FLOPs / peak + instructions x 64 cycles / 2.4 GHz [I: fixed cost as VectorE's]
    t_VectorE = (free elements / 2 per cycle + instructions x 64 cycles) / 0.96 GHz     (256 fp32 lanes / 128)
    t_ScalarE = (free elements / 1 per cycle + instructions x 64 cycles [I]) / 1.2 GHz  (128 lanes / 128)
    t_GpSimd  = as VectorE [I]
    t_DMA     = HBM bytes / 368 GB/s + transfers x 1.3 us / 16 queues
    t_unit    = max(t_TensorE, t_VectorE, t_ScalarE, t_GpSimd, t_DMA)   (engines overlap perfectly: a lower bound)

An aten op is one unit with one instruction per engine it uses, one DMA transfer per tensor it reads or writes, and
its elements spread over the 128 partitions. The step is the sum of its units (units never overlap each other), on
one core; `chip_step_s` divides by the 8 physical cores of a chip (ideal data parallelism, the all-reduce left
out). Every prediction is made at both TensorE peaks (bytes unchanged); the one the kernels run at is the default
(`kernel_matmul_peak`: bf16, the dtype of their matmul operands, `matmul_dtype`; the reference runs its matmuls in
bf16 too under the Neuron device's bf16 autocast), the fp32 one kept beside it for comparison.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry, sdpa_backward_flop_count, sdpa_flop_count

from .. import records
from ..kernels import interpreted, ops
from ..kernels.interpreter import Counts
from ..profiles import get_profile
from ..recipes import resolve

from . import bench_records

ROOFLINE_RECORD = "frontier-roofline"
ENGINES = ("tensor", "vector", "scalar", "gpsimd", "dma")


@dataclass(frozen=True)
class Peaks:
    """One NeuronCore-v3 (Trn2), from shared/reference/nki.md."""

    tensor_flops: dict = field(default_factory=lambda: {"fp32": 20e12, "bf16": 79e12})
    tensor_hz: float = 2.4e9
    vector_hz: float = 0.96e9
    vector_per_cycle: float = 2.0  # free elements per partition per cycle: 256 fp32 elements / 128 partitions
    scalar_hz: float = 1.2e9
    scalar_per_cycle: float = 1.0  # 128 elements / 128 partitions
    instruction_cycles: float = 64.0  # VectorE's fixed cost per instruction; assumed for the other engines [I]
    dma_bytes_per_s: float = 368e9  # 16 DMA engines x ~23 GB/s
    dma_fixed_s: float = 1.3e-6  # per transfer
    dma_queues: int = 16
    partitions: int = 128
    cores_per_chip: int = 8


PEAKS = Peaks()


def kernel_matmul_peak() -> str:
    """The TensorE peak the NKI kernels run at: that of their matmul operands' dtype (the kernels' default)."""
    from ..kernels.verify import matmul_dtype

    return {"bfloat16": "bf16", "float32": "fp32"}[matmul_dtype("mlp_fwd")]


@dataclass
class Work:
    """What one unit asks of each engine (the cost model's input)."""

    matmul_flops: float = 0.0
    instructions: dict = field(default_factory=lambda: dict.fromkeys(ENGINES[:4], 0))
    free_elements: dict = field(default_factory=lambda: dict.fromkeys(ENGINES[:4], 0))
    hbm_bytes: float = 0.0
    dma_transfers: int = 0

    def scaled(self, k: float) -> "Work":
        return Work(self.matmul_flops * k, {e: v * k for e, v in self.instructions.items()},
                    {e: v * k for e, v in self.free_elements.items()}, self.hbm_bytes * k, int(self.dma_transfers * k))

    def __add__(self, o: "Work") -> "Work":
        return Work(self.matmul_flops + o.matmul_flops,
                    {e: self.instructions[e] + o.instructions[e] for e in self.instructions},
                    {e: self.free_elements[e] + o.free_elements[e] for e in self.free_elements},
                    self.hbm_bytes + o.hbm_bytes, self.dma_transfers + o.dma_transfers)


def engine_times(w: Work, peaks: Peaks = PEAKS, matmul_peak: str = "fp32") -> dict[str, float]:
    """Seconds each engine needs for `w` (the formulas of the module docstring)."""
    fixed = peaks.instruction_cycles
    return {
        "tensor": w.matmul_flops / peaks.tensor_flops[matmul_peak] + w.instructions["tensor"] * fixed / peaks.tensor_hz,
        "vector": (w.free_elements["vector"] / peaks.vector_per_cycle + w.instructions["vector"] * fixed) / peaks.vector_hz,
        "scalar": (w.free_elements["scalar"] / peaks.scalar_per_cycle + w.instructions["scalar"] * fixed) / peaks.scalar_hz,
        "gpsimd": (w.free_elements["gpsimd"] / peaks.vector_per_cycle + w.instructions["gpsimd"] * fixed) / peaks.vector_hz,
        "dma": w.hbm_bytes / peaks.dma_bytes_per_s + w.dma_transfers * peaks.dma_fixed_s / peaks.dma_queues,
    }


def unit_time(w: Work, peaks: Peaks = PEAKS, matmul_peak: str = "fp32") -> float:
    return max(engine_times(w, peaks, matmul_peak).values())


def from_counts(c: Counts) -> Work:
    """The interpreter's counts of a kernel call as engine work."""
    return Work(c.matmul_flops, dict(c.instructions), dict(c.free_elements), c.hbm_read_bytes + c.hbm_write_bytes,
                c.dma_transfers)


# ---------------------------------------------------------------------------------------------------- aten ops
_FREE = {"detach", "lift_fresh", "_local_scalar_dense", "empty", "empty_like", "empty_strided", "new_empty",
         "_record_function_enter_new", "_record_function_exit", "alias", "_unsafe_view", "set_", "resize_"}
_SCALAR_E = {"exp", "exp2", "log", "log2", "tanh", "sigmoid", "rsqrt", "sqrt", "sin", "cos", "erf", "reciprocal",
             "pow", "_safe_softmax", "_softmax", "_log_softmax", "logsumexp", "tanh_backward", "sigmoid_backward"}


def _tensors(tree) -> list[torch.Tensor]:
    out = []
    for a in tree if isinstance(tree, (list, tuple)) else [tree]:
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out += _tensors(a)
    return out


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def aten_unit(func, args, kwargs, out, peaks: Peaks = PEAKS) -> Work | None:
    """One aten op as a round trip to HBM (None for views and ops that move no data)."""
    name = func._opname
    if func.is_view or name in _FREE or func.namespace not in ("aten", "prims"):
        return None
    ins, outs = _tensors(list(args) + list(kwargs.values())), _tensors(out)
    mutated = name.endswith("_") and not name.startswith("_")  # in place: the output is the first input
    moved = ins + ([] if mutated else outs)
    w = Work(hbm_bytes=sum(map(_nbytes, moved)) + (_nbytes(ins[0]) if mutated and ins else 0),
             dma_transfers=len(moved) + (1 if mutated and ins else 0))
    packet = func._overloadpacket
    if packet in flop_registry:
        w.matmul_flops = flop_registry[packet](*args, **kwargs, out_val=out)
        w.instructions["tensor"] = 1
        return w
    elems = max([t.numel() for t in ins + outs] or [0])
    engine = "scalar" if name in _SCALAR_E else "vector"
    w.instructions[engine] = 1
    w.free_elements[engine] = math.ceil(elems / peaks.partitions)
    return w


def attention_unit(q, k, v, backward: bool, peaks: Peaks = PEAKS) -> Work:
    """The vendor's causal flash attention on (B, H, T, hd) tensors, modelled (see the module docstring)."""
    B, H, T, hd = q.shape
    if backward:
        flops = sdpa_backward_flop_count(q.shape, q.shape, k.shape, v.shape) / 2
        moved = [q, k, v, q, q] + [q, k, v]  # q, k, v, o, dO in; dQ, dK, dV out
    else:
        flops = sdpa_flop_count(q.shape, k.shape, v.shape) / 2
        moved = [q, k, v, q]
    w = Work(matmul_flops=flops, hbm_bytes=sum(map(_nbytes, moved)), dma_transfers=len(moved))
    w.free_elements["scalar"] = math.ceil(B * H * T * T / 2 / peaks.partitions)  # exp of the unmasked scores
    w.instructions["tensor"] = w.instructions["scalar"] = 1
    return w


class _Attention(torch.autograd.Function):
    """Stands in for SDPA while tracing: records the modelled attention units, returns empty tensors."""

    @staticmethod
    def forward(ctx, q, k, v, tracer):
        ctx.tracer, ctx.shapes = tracer, (q, k, v)
        tracer.add("attention", "forward", attention_unit(q, k, v, False), attention_unit(q, k, v, False))
        return torch.empty_like(q)

    @staticmethod
    def backward(ctx, dy):
        q, k, v = ctx.shapes
        ctx.tracer.add("attention", "backward", attention_unit(q, k, v, True), attention_unit(q, k, v, True))
        return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), None


class _SDPA(TorchFunctionMode):
    def __init__(self, tracer):
        super().__init__()
        self.tracer = tracer

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is F.scaled_dot_product_attention:
            q, k, v = args[:3]
            if k.size(1) != q.size(1):  # grouped-query attention: k and v shared over q's heads
                rep = q.size(1) // k.size(1)
                k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
            return _Attention.apply(q, k, v, self.tracer)
        return func(*args, **(kwargs or {}))


class _AtenCounter(TorchDispatchMode):
    """Every aten op dispatched, as Work, and the seconds of each priced as its own unit (per matmul peak)."""

    def __init__(self, peaks: Peaks = PEAKS):
        super().__init__()
        self.peaks, self.work, self.ops = peaks, Work(), Counter()
        self.seconds = dict.fromkeys(peaks.tensor_flops, 0.0)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        w = aten_unit(func, args, kwargs, out, self.peaks)
        if w is not None:
            self.work = self.work + w
            self.ops[func._opname] += 1
            for p in self.seconds:
                self.seconds[p] += unit_time(w, self.peaks, p)
        return out


def _signature(func, args) -> tuple:
    def sig(a):
        if isinstance(a, torch.Tensor):
            return ("T", tuple(a.shape), str(a.dtype))
        if isinstance(a, (list, tuple)):
            return tuple(sig(x) for x in a)
        return a if not isinstance(a, str) else None  # the impl string is not part of the signature
    return (str(func), tuple(sig(a) for a in args))


def _body(func):
    """The Python body of a `frontier::` custom op (what its implementation string dispatches to)."""
    opdef = torch._library.custom_ops.OPDEFS[f"{func.namespace}::{func._opname}"]
    return opdef._init_fn


def _with_impl(args, impl):
    return tuple(impl if a in ops.IMPLEMENTATIONS else a for a in args)


def reference_work(func, args, kwargs, peaks: Peaks = PEAKS) -> _AtenCounter:
    """The reference body of one fused call, on meta tensors, as aten units (each its own round trip)."""
    counter = _AtenCounter(peaks)
    with torch.no_grad(), counter:
        _body(func)(*_with_impl(args, "reference"), **kwargs)
    return counter


def _real(a, gen, vocab):
    if not isinstance(a, torch.Tensor):
        return a
    if a.dtype in (torch.int64, torch.int32):
        return torch.randint(0, vocab, a.shape, generator=gen, dtype=a.dtype)
    return torch.randn(a.shape, generator=gen, dtype=a.dtype).mul_(0.1)


def kernel_work(func, args, kwargs, vocab: int) -> tuple[Work, dict, float]:
    """The NKI kernel of one fused call run once by the interpreter on random tensors of the call's shapes."""
    gen = torch.Generator().manual_seed(0)
    stacked = 1
    if func._opname == "newton_schulz" and args[0].dim() > 2:  # a stack of equal matrices: count one
        stacked = math.prod(args[0].shape[:-2])
        args = (args[0].reshape(-1, *args[0].shape[-2:])[:1], *args[1:])
    real = [_real(a, gen, vocab) for a in args]
    if func._opname == "adamw_step":
        real[3] = real[3].abs()  # the second moment is non-negative
    interpreted.COUNTS.clear()
    t0 = time.perf_counter()
    with torch.no_grad():
        _body(func)(*_with_impl(tuple(real), "interpreter"), **kwargs)
    wall = time.perf_counter() - t0
    total, kernels = Work(), {}
    for name, calls in interpreted.COUNTS.items():
        for c in calls:
            total = total + from_counts(c)
        kernels[name] = len(calls) * stacked
        peak = max(c.peak_sbuf_bytes for c in calls)
        kernels[name + ".peak_sbuf_bytes"] = peak
    return total.scaled(stacked), kernels, wall


# ---------------------------------------------------------------------------------------------------- the step
@dataclass
class Unit:
    """One thing a step does: a fused op's call (`op` its name), glue, or attention; its work both ways. A fused
    unit also keeps its call (to price it), the seconds of its reference's aten ops per matmul peak, how many of
    each aten op its reference issued, and how many calls of each kernel the interpreter counted."""

    kind: str  # "fused", "glue", "attention"
    op: str
    reference: Work | None
    kernel: Work | None
    signature: tuple = ()
    call: tuple | None = None
    ref_seconds: dict = field(default_factory=dict)
    ref_ops: dict = field(default_factory=dict)
    kernels: dict = field(default_factory=dict)


class _Tracer(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.units: list[Unit] = []

    def add(self, kind, op, ref, ker, signature=(), call=None):
        self.units.append(Unit(kind, op, ref, ker, signature, call))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func.namespace == "frontier":
            self.add("fused", func._opname, None, None, _signature(func, args), (func, args, kwargs))
        else:
            w = aten_unit(func, args, kwargs, out)
            if w is not None:
                self.add("glue", func._opname, w, w)
        return out


def trace_step(cfg) -> list[Unit]:
    """The units of one training step of `cfg` (forward, backward, optimiser), traced on the meta device."""
    from ..model.gpt import GPT
    from ..optim.optimizers import Optimizers

    t = cfg.train
    tracer = _Tracer()
    with torch.device("meta"):
        model = GPT(cfg.model, t.seq_len, t.batch_size, kernels="reference")
        opts = Optimizers(model, cfg)
        idx = torch.zeros(t.batch_size, t.seq_len, dtype=torch.long)
    with _SDPA(tracer), tracer:
        model(idx, idx, fold=0 if cfg.model.ngram is not None else None).backward()
        opts.step(0.5, 100, idx)
    return tracer.units


def price(units: list[Unit], vocab: int, peaks: Peaks = PEAKS, log=print) -> dict:
    """Fill in the fused units' reference and kernel work (one interpreter run per distinct signature); returns
    the interpreter's wall seconds per signature."""
    cache, walls = {}, {}
    for u in units:
        if u.kind != "fused":
            continue
        if u.signature not in cache:
            func, args, kwargs = u.call
            ref = reference_work(func, args, kwargs, peaks)
            ker, kernels, wall = kernel_work(func, args, kwargs, vocab)
            cache[u.signature] = (ref, ker, kernels)
            walls[str(func) + " " + str(u.signature[1])] = wall
            log(f"roofline: {func}: {wall:.1f}s in the interpreter ({', '.join(k for k in kernels if '.' not in k)})")
        ref, u.kernel, u.kernels = cache[u.signature]
        u.reference, u.ref_seconds, u.ref_ops = ref.work, ref.seconds, dict(ref.ops)
    return walls


def _group(u: Unit) -> str:
    return u.op.removesuffix("_backward") + (" (backward)" if u.op.endswith("_backward") else "")


def summarise(units: list[Unit], peaks: Peaks = PEAKS, matmul_peak: str = "fp32") -> list[dict]:
    """Per op group (fused ops forward and backward, glue, attention): calls, FLOPs, HBM bytes and predicted
    seconds per step, reference and kernel."""
    rows: dict[str, dict] = {}
    for u in units:
        key = _group(u) if u.kind == "fused" else ("attention" if u.kind == "attention" else "glue (aten, not fused)")
        r = rows.setdefault(key, {"op": key, "kind": u.kind, "calls": 0, "ref_flops": 0.0, "ref_bytes": 0.0,
                                  "ref_s": 0.0, "kernel_flops": 0.0, "kernel_bytes": 0.0, "kernel_s": 0.0,
                                  "ref_aten_ops": 0})
        r["calls"] += 1
        r["ref_flops"] += u.reference.matmul_flops
        r["ref_bytes"] += u.reference.hbm_bytes
        r["ref_s"] += u.ref_seconds[matmul_peak] if u.kind == "fused" else unit_time(u.reference, peaks, matmul_peak)
        r["kernel_flops"] += u.kernel.matmul_flops
        r["kernel_bytes"] += u.kernel.hbm_bytes
        r["kernel_s"] += unit_time(u.kernel, peaks, matmul_peak)
        r["ref_aten_ops"] += sum(u.ref_ops.values()) if u.kind == "fused" else 1
    return list(rows.values())


def _step_seconds(rows: list[dict]) -> tuple[float, float]:
    """The step's predicted seconds, reference and kernel: the sum of `summarise`'s rows."""
    return sum(r["ref_s"] for r in rows), sum(r["kernel_s"] for r in rows)


def roofline(profile: str, recipe: str = "baseline", n_layer: int | None = None, n_embd: int | None = None,
             budget_s: float = 1800.0, log=print) -> dict:
    """The predicted step of `recipe` at `profile`'s shapes (optionally another depth and width, head size kept),
    reference against fused kernels, and what the saving buys in `budget_s`: the record
    `frontier kernels --roofline` writes."""
    code = records.code_version()  # the code that computes it (taken first: the run takes minutes)
    cfg = resolve(recipe, profile)
    m = cfg.model
    if n_layer or n_embd:
        width = n_embd or m.n_embd
        heads = max(1, width // m.head_dim)
        cfg = replace(cfg, model=replace(m, n_layer=n_layer or m.n_layer, n_embd=width, n_head=heads, n_kv_head=heads))
    m, t = cfg.model, cfg.train
    units = trace_step(cfg)
    deeper = trace_step(replace(cfg, model=replace(m, n_layer=m.n_layer + 1)))
    t0 = time.perf_counter()
    walls = price(units + deeper, m.vocab_size, PEAKS, log)
    tokens = t.batch_size * t.seq_len
    out = {"record": ROOFLINE_RECORD, "created": datetime.now().astimezone().isoformat(timespec="seconds"),
           "profile": profile, "recipe": recipe,
           "shapes": {"n_layer": m.n_layer, "n_embd": m.n_embd, "n_head": m.n_head, "head_dim": m.head_dim,
                      "mlp": m.mlp_ratio * m.n_embd, "vocab": m.vocab_size, "batch": t.batch_size,
                      "seq_len": t.seq_len, "tokens": tokens},
           "peaks": asdict(PEAKS), "interpreter_s": time.perf_counter() - t0, "interpreter_walls": walls,
           "predictions": {}}
    for p in PEAKS.tensor_flops:
        rows = summarise(units, PEAKS, p)
        ref_s, ker_s = _step_seconds(rows)
        ref_deep, ker_deep = _step_seconds(summarise(deeper, PEAKS, p))
        layer_ref, layer_ker = ref_deep - ref_s, ker_deep - ker_s
        fixed_ker = ker_s - m.n_layer * layer_ker
        chip = PEAKS.cores_per_chip
        out["predictions"][p] = {
            "rows": rows, "core_step_s": {"reference": ref_s, "kernel": ker_s},
            "chip_step_s": {"reference": ref_s / chip, "kernel": ker_s / chip},
            "chip_tokens_per_s": {"reference": tokens * chip / ref_s, "kernel": tokens * chip / ker_s},
            "speedup": ref_s / ker_s,
            "per_layer_core_s": {"reference": layer_ref, "kernel": layer_ker},
            "steps_in_budget": {"reference": budget_s * chip / ref_s, "kernel": budget_s * chip / ker_s},
            "layers_at_reference_step": (ref_s - fixed_ker) / layer_ker,
        }
    out["budget_s"] = budget_s
    out["kernel_matmul_peak"] = kernel_matmul_peak()
    out["code"], out["hardware"] = code, records.hardware()
    return out


def format_roofline(r: dict, matmul_peak: str | None = None) -> str:
    """The record's prediction at `matmul_peak` (default: the peak its kernels run at; records from before it was
    stored were made with fp32 kernels)."""
    matmul_peak = matmul_peak or r.get("kernel_matmul_peak", "fp32")
    s, p = r["shapes"], r["predictions"][matmul_peak]
    lines = [f"roofline (predicted by a cost model, not measured): {s['n_layer']} layers x {s['n_embd']}, "
             f"{s['batch']} x {s['seq_len']} tokens, vocabulary {s['vocab']}; one NeuronCore-v3, matmuls at the "
             f"{matmul_peak} peak",
             f"{'op':<34}{'calls':>6}{'ref GFLOP':>11}{'ref GB':>9}{'ref ms':>9}{'NKI GFLOP':>11}{'NKI GB':>9}"
             f"{'NKI ms':>9}"]
    for row in sorted(p["rows"], key=lambda x: -x["ref_s"]):
        lines.append(f"{row['op']:<34}{row['calls']:>6}{row['ref_flops'] / 1e9:>11.1f}{row['ref_bytes'] / 1e9:>9.2f}"
                     f"{row['ref_s'] * 1e3:>9.1f}{row['kernel_flops'] / 1e9:>11.1f}{row['kernel_bytes'] / 1e9:>9.2f}"
                     f"{row['kernel_s'] * 1e3:>9.1f}")
    c, k = p["core_step_s"], p["chip_tokens_per_s"]
    lines.append(f"step on one core: reference {c['reference']:.3f}s, fused {c['kernel']:.3f}s ({p['speedup']:.2f}x); "
                 f"a chip (8 cores, ideal): {k['reference']:,.0f} -> {k['kernel']:,.0f} tokens/s; at the reference's "
                 f"step time the fused model affords {p['layers_at_reference_step']:.1f} layers")
    return "\n".join(lines)


def find_record(folder, profile: str, n_layer: int | None = None, n_embd: int | None = None) -> dict | None:
    """The newest roofline record in `folder` for `profile` at that depth and width (None: the profile's); its
    `path` set to where it was read from."""
    p = get_profile(profile)
    want = (n_layer or p.n_layer, n_embd or p.n_embd)
    for path in sorted(Path(folder).glob("roofline-*.json"), reverse=True):  # names end in their time: newest first
        rec = json.loads(path.read_text())
        if rec.get("record") == ROOFLINE_RECORD and rec["profile"] == profile and \
                (rec["shapes"]["n_layer"], rec["shapes"]["n_embd"]) == want:
            return {**rec, "path": str(path)}
    return None


def record_path(folder, profile: str, n_layer: int | None = None, n_embd: int | None = None):
    """Where a new roofline record for these shapes goes in `folder` (`roofline-PROFILE+LxD-TIME.json`), found
    before the minutes of computing it, so that a path that cannot be written is refused first."""
    p = get_profile(profile)
    return bench_records.new_record_path(folder, "roofline", [profile, f"{n_layer or p.n_layer}x{n_embd or p.n_embd}"])


def roofline_record(profile: str, folder, n_layer: int | None = None, n_embd: int | None = None,
                    log=print) -> dict:
    """The newest roofline record for these shapes in `folder`, or a new one computed and written there (minutes at
    the trn2 shapes: the interpreter runs every kernel once)."""
    rec = find_record(folder, profile, n_layer, n_embd)
    if rec is not None:
        return rec
    path = record_path(folder, profile, n_layer, n_embd)
    result = roofline(profile, n_layer=n_layer, n_embd=n_embd, log=log)
    result["command"] = [f"frontier.study.roofline.roofline_record({profile!r}, n_layer={n_layer}, n_embd={n_embd})"]
    bench_records.write_bench_record(result, path)
    return result
