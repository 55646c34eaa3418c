"""What every NKI kernel is checked against besides its unit tests: its size at a config's shapes, the NKI language,
and its error against float64, on random inputs and on a trained model's activations.

- `inventory(cfg, rows)`: every kernel call one training step of `cfg` makes on one worker (`rows` sequences),
  specialized on shapes alone (`interpreter.trace`): the instructions it emits against the budget
  (`STATIC_INSTRUCTION_LIMIT`; the compiler's real limit is undocumented), its device loops, SBUF and PSUM peaks,
  the dtype of its matmul operands, and whether its source passes the language check. `frontier kernels` lists it
  at the trn2 shapes.
- `accuracy(cfg, tokens)`: each kernel entry point run in the interpreter on seeded random inputs at `cfg`'s widths
  (`tokens` positions for the activation kernels; the optimiser kernels at the model's matrix shapes and its largest
  parameter), in two precisions, against the same computation in float64: "fp32" (fp32 data, fp32 matmul operands)
  and "bf16" (the matmul kernels with bf16 operands, their default and what Trn2 runs; RMSNorm and RoPE with bf16
  inputs and outputs, as under bf16 autocast, against float64 on the same rounded inputs; AdamW keeps fp32 state by
  design, so it has no bf16 figure). The error of an output is max |kernel - float64| / max |float64|.
- `verify_calls(calls)`: the same comparison on captured fused-op calls, e.g. those of a trained model
  (`frontier.study.census.trained_activations`), with the head's vocabulary cut into chunks of `vchunk` so that the
  online log-sum-exp rescales, and measures of what the activations exercise: the rows whose running max moved after
  the first chunk (each such row multiplies its running sum by exp(old max - new max)), and how far tanh saturates
  (|tanh(l / cap)|: the softcap's factor 1 - t^2 of the gradient).

Only `frontier.config` is needed from outside the kernel layer (shapes come from a RunConfig).
"""

from __future__ import annotations

import inspect
import math
from functools import cache

import ml_dtypes
import numpy as np
import torch
import torch.nn.functional as F

from ..config import RunConfig
from . import reference
from .interpreter import STATIC_INSTRUCTION_LIMIT, load, run, trace, violations
from .nki import adamw_step_scalars
from .toolchain import LNC

BF16 = np.dtype(ml_dtypes.bfloat16)
F32 = np.float32
# kernel entry point -> its module in frontier/kernels/nki
ENTRY_POINTS = {
    "rmsnorm_fwd": "rmsnorm", "rmsnorm_bwd": "rmsnorm", "rope_fwd": "rotary", "rope_bwd": "rotary",
    "mlp_fwd": "relu2_mlp", "mlp_bwd": "relu2_mlp", "head_ce_fwd": "head_ce", "head_ce_bwd": "head_ce",
    "head_ce_bias_fwd": "head_ce", "head_ce_bias_bwd": "head_ce", "newton_schulz": "newton_schulz", "adamw": "adamw",
}


@cache
def _module(name: str):
    return load(f"frontier.kernels.nki.{name}")


def kernel(name: str):
    """The interpreter-loaded kernel `name` (an ENTRY_POINTS key)."""
    return getattr(_module(ENTRY_POINTS[name]), name)


def matmul_dtype(name: str) -> str | None:
    """The default dtype of the kernel's matmul operands (None: the kernel does no matmul)."""
    p = inspect.signature(kernel(name).fn).parameters.get("matmul_dtype")
    return None if p is None else p.default


# ---------------------------------------------------------------------------------------------------- inventory
def _shapes(cfg: RunConfig, rows: int) -> dict:
    m, t = cfg.model, cfg.train
    n = rows * t.seq_len
    return {"tokens": n, "rows": rows, "seq_len": t.seq_len, "width": m.n_embd, "heads": m.n_head,
            "kv_heads": m.n_kv_head, "head_dim": m.head_dim, "mlp": m.mlp_ratio * m.n_embd, "vocab": m.vocab_size,
            "ngram": m.ngram is not None}


def kernel_calls(cfg: RunConfig, rows: int) -> list[tuple[str, str, tuple, dict]]:
    """(kernel, what the call is, input (shape, dtype) specs, constants) for one step of `cfg` on `rows` sequences:
    each distinct call once."""
    s = _shapes(cfg, rows)
    n, d, hd, f, v, T = s["tokens"], s["width"], s["head_dim"], s["mlp"], s["vocab"], s["seq_len"]
    f32, i32 = np.float32, np.int32
    eps = float(np.finfo(np.float32).eps)
    cap = cfg.model.logit_softcap
    out = []
    for label, shape in (("residual", (n, d)), ("q/k heads", (n * s["heads"], hd))):
        out.append(("rmsnorm_fwd", label, ((shape, f32),), {"eps": eps}))
        out.append(("rmsnorm_bwd", label, ((shape, f32), (shape, f32)), {"eps": eps}))
    rope = {s["kv_heads"]: "k", s["heads"]: "q" if s["kv_heads"] != s["heads"] else "q, k"}
    for heads, label in sorted(rope.items()):
        x = ((n, heads * hd), f32)
        tables = (((T, hd // 2), f32), ((T, hd // 2), f32))
        out.append(("rope_fwd", label, (x, *tables), {}))
        out.append(("rope_bwd", label, (x, *tables), {}))
    w1, w2, x = ((f, d), f32), ((d, f), f32), ((n, d), f32)
    out.append(("mlp_fwd", "", (x, w1, w2), {}))
    out.append(("mlp_bwd", "", (x, w1, w2, x), {}))
    h, w, tg, col = ((n, d), f32), ((v, d), f32), ((n,), i32), ((n,), f32)
    suffix = "_bias" if s["ngram"] else ""
    bias = (((n, v), f32),) if s["ngram"] else ()
    out.append((f"head_ce{suffix}_fwd", "", (h, w, tg, *bias), {"cap": cap}))
    out.append((f"head_ce{suffix}_bwd", "", (h, w, tg, *bias, col, col), {"cap": cap}))
    for shape in sorted({(d, d), (f, d), (d, f), (cfg.model.n_kv_head * hd, d)}):
        out.append(("newton_schulz", f"{shape[0]}x{shape[1]}", ((shape, f32),), {"steps": cfg.optim.ns_steps}))
    flat = ((v * d,), f32)
    per_step = ((128, 1), f32)
    out.append(("adamw", f"{v}x{d} (the largest parameter)", (flat,) * 4 + (per_step,) * 3,
                {"beta1": cfg.optim.adam_betas[0], "beta2": cfg.optim.adam_betas[1], "eps": cfg.optim.adam_eps}))
    return out


def inventory(cfg: RunConfig, rows: int) -> dict:
    """Each kernel call of one step on one worker, traced (module docstring)."""
    out = []
    for name, label, specs, consts in kernel_calls(cfg, rows):
        k = kernel(name)
        found = violations(k.fn)
        row = {"kernel": name, "call": label, "inputs": [list(shape) for shape, _ in specs],
               "matmul_dtype": matmul_dtype(name), "language_ok": not found,
               "language_violations": [str(v) for v in found]}
        if not found:
            c = trace(k, *specs, lnc=LNC, **consts)  # as launched on a Trn2: the larger core's program
            row.update(instructions=c.static_total, within_limit=c.static_total <= STATIC_INSTRUCTION_LIMIT,
                       instructions_by_engine=dict(c.static_instructions), dynamic_loops=c.dynamic_loops,
                       peak_sbuf_bytes=c.peak_sbuf_bytes, peak_psum_banks=c.peak_psum_banks)
        out.append(row)
    return {"shapes": _shapes(cfg, rows), "instruction_limit": STATIC_INSTRUCTION_LIMIT, "lnc": LNC, "kernels": out}


def format_inventory(inv: dict) -> str:
    s = inv["shapes"]
    lines = [f"NKI kernels at these shapes (per worker: {s['rows']} rows of {s['seq_len']:,} tokens = {s['tokens']:,}; "
             f"width {s['width']}, MLP {s['mlp']}, vocabulary {s['vocab']:,}); instructions emitted per call against "
             f"a budget of {inv['instruction_limit']:,} (our limit: the compiler's, EBVF030, is undocumented), per "
             f"physical core at LNC={inv['lnc']}",
             f"  {'kernel':<17}{'call':<28}{'instructions':>13}{'loops':>7}{'SBUF KiB':>10}{'PSUM':>6}  "
             f"{'matmul':<10}language"]
    for r in inv["kernels"]:
        lang = "passes" if r["language_ok"] else f"FAILS ({len(r['language_violations'])} violations)"
        if not r["language_ok"]:
            lines.append(f"  {r['kernel']:<17}{r['call']:<28}{'-':>13}{'':>7}{'':>10}{'':>6}  "
                         f"{r['matmul_dtype'] or '-':<10}{lang}")
            continue
        count = f"{r['instructions']:,}" + ("" if r["within_limit"] else " !")
        lines.append(f"  {r['kernel']:<17}{r['call']:<28}{count:>13}{r['dynamic_loops']:>7}"
                     f"{r['peak_sbuf_bytes'] / 1024:>10.1f}{r['peak_psum_banks']:>6}  {r['matmul_dtype'] or '-':<10}"
                     f"{lang}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------- float64
def _t(a) -> torch.Tensor:
    return torch.from_numpy(np.asarray(a, np.float64))


def _grad(fn, inputs, dout):
    """(outputs, gradients of sum(outputs * dout) with respect to `inputs`), in float64."""
    leaves = [_t(a).requires_grad_() for a in inputs]
    out = fn(*leaves)
    out.backward(_t(dout))
    return out.detach().numpy(), [x.grad.numpy() for x in leaves]


def _mlp64(x, w1, w2):
    return F.relu(x @ w1.T).square() @ w2.T


def _ce64(cap):
    def loss(h, w, targets):
        z = cap * torch.tanh(h @ w.T / cap)
        return torch.logsumexp(z, -1) - z.gather(-1, targets[:, None])[:, 0]

    return loss


def reference64(name: str, arrays: list, consts: dict) -> tuple:
    """The float64 result of kernel entry point `name` on these inputs (arrays as the kernel takes them)."""
    a = [np.asarray(x) for x in arrays]
    if name == "rmsnorm_fwd":
        return (F.rms_norm(_t(a[0]), (a[0].shape[-1],), eps=consts["eps"]).numpy(),)
    if name == "rmsnorm_bwd":
        return tuple(_grad(lambda x: F.rms_norm(x, (a[0].shape[-1],), eps=consts["eps"]), [a[0]], a[1])[1])
    if name in ("rope_fwd", "rope_bwd"):
        T, half = a[1].shape
        x = _t(a[0]).view(-1, T, a[0].shape[1] // (2 * half), 2 * half)
        fn = reference.rotary_fwd if name == "rope_fwd" else reference.rotary_bwd
        return (fn(x, _t(a[1]), _t(a[2])).reshape(a[0].shape).numpy(),)
    if name == "mlp_fwd":
        return (_mlp64(_t(a[0]), _t(a[1]), _t(a[2])).numpy(),)
    if name == "mlp_bwd":
        return tuple(_grad(_mlp64, a[:3], a[3])[1])
    if name == "head_ce_fwd":
        h, w, targets = _t(a[0]), _t(a[1]), torch.from_numpy(a[2].astype(np.int64))
        z = consts["cap"] * torch.tanh(h @ w.T / consts["cap"])
        lse = torch.logsumexp(z, -1)
        return (lse - z.gather(-1, targets[:, None])[:, 0]).numpy(), lse.numpy()
    if name == "head_ce_bwd":
        targets = torch.from_numpy(a[2].astype(np.int64))
        _, (dh, dw) = _grad(lambda h, w: _ce64(consts["cap"])(h, w, targets), a[:2], a[4])
        return dh, dw
    if name == "newton_schulz":
        return (reference.newton_schulz(_t(a[0]), consts["steps"]).numpy(),)
    if name == "adamw":
        p, g, m, v = (x.astype(np.float64) for x in a[:4])
        step_size, inv_bc2, decay = (float(x[0, 0]) for x in a[4:7])
        b1, b2, eps = consts["beta1"], consts["beta2"], consts["eps"]
        m2, v2 = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        return p * decay - step_size * m2 / (np.sqrt(v2 * inv_bc2) + eps), m2, v2
    raise ValueError(f"no float64 reference for {name}")


def errors(name: str, arrays: list, consts: dict) -> list[float]:
    """max |kernel - float64| / max |float64| per output of one kernel call (float64 on the same inputs)."""
    got, _ = run(kernel(name), *arrays, **consts)
    got = got if isinstance(got, tuple) else (got,)
    want = reference64(name, arrays, consts)
    return [float(np.abs(np.asarray(g, np.float64) - w).max() / max(np.abs(w).max(), 1e-300))
            for g, w in zip(got, want)]


# ---------------------------------------------------------------------------------------------------- accuracy
def _inputs(cfg: RunConfig, tokens: int, seed: int = 0) -> dict:
    """Seeded inputs of every entry point at cfg's widths: model-like scales (rms-normed activations, 1/sqrt(D)
    weights, a head whose logits the softcap bends, momentum-sized Newton-Schulz inputs, a mid-training AdamW state)."""
    m = cfg.model
    r = np.random.default_rng(seed)
    d, hd, f, v, H = m.n_embd, m.head_dim, m.mlp_ratio * m.n_embd, m.vocab_size, m.n_head
    T = min(cfg.train.seq_len, tokens)
    n = tokens

    def normal(*shape, scale=1.0):
        return (r.standard_normal(shape) * scale).astype(F32)

    ang = np.outer(np.arange(T), 10_000.0 ** (-np.arange(hd // 2) / (hd // 2)))
    x_q = normal(n, H * hd)
    hidden, w_head = normal(n, d), normal(v, d, scale=4 / math.sqrt(d))
    targets = r.integers(0, v, n).astype(np.int32)
    dloss = ((0.5 + r.random(n)) / n).astype(F32)
    h64, w64 = hidden.astype(np.float64), w_head.astype(np.float64)
    z = m.logit_softcap * np.tanh(h64 @ w64.T / m.logit_softcap)
    lse = (z.max(1) + np.log(np.exp(z - z.max(1, keepdims=True)).sum(1))).astype(F32)
    k = v * d
    o = cfg.optim
    sc = adamw_step_scalars(1e-3, 100, *o.adam_betas, o.weight_decay)
    eps = float(np.finfo(F32).eps)
    return {
        "rmsnorm_fwd": ([normal(n, d, scale=3)], {"eps": eps}),
        "rmsnorm_bwd": ([normal(n, d, scale=3), normal(n, d)], {"eps": eps}),
        "rope_fwd": ([x_q, np.cos(ang).astype(F32), np.sin(ang).astype(F32)], {}),
        "rope_bwd": ([normal(n, H * hd), np.cos(ang).astype(F32), np.sin(ang).astype(F32)], {}),
        "mlp_fwd": ([normal(n, d), normal(f, d, scale=d**-0.5), normal(d, f, scale=0.02)], {}),
        "mlp_bwd": ([normal(n, d), normal(f, d, scale=d**-0.5), normal(d, f, scale=0.02), normal(n, d)], {}),
        "head_ce_fwd": ([hidden, w_head, targets], {"cap": m.logit_softcap}),
        "head_ce_bwd": ([hidden, w_head, targets, lse, dloss], {"cap": m.logit_softcap}),
        "newton_schulz": [([normal(*shape, scale=1e-2)], {"steps": o.ns_steps})
                          for shape in sorted({(d, d), (f, d), (d, f)})],
        "adamw": ([normal(k), normal(k, scale=1e-2), normal(k, scale=1e-3), (normal(k, scale=1e-2)) ** 2,
                   sc["step_size"], sc["inv_bc2"], sc["decay"]],
                  {"beta1": o.adam_betas[0], "beta2": o.adam_betas[1], "eps": o.adam_eps}),
    }


def accuracy(cfg: RunConfig, tokens: int, log=print) -> dict:
    """Every entry point's error against float64 in fp32 and bf16 (module docstring), at cfg's widths."""
    rows = []
    for name, cases in _inputs(cfg, tokens).items():
        for arrays, consts in (cases if isinstance(cases, list) else [cases]):
            shapes = [list(a.shape) for a in arrays]
            row = {"kernel": name, "inputs": shapes, "matmul_dtype": matmul_dtype(name), "fp32": None, "bf16": None}
            if matmul_dtype(name) is not None:
                row["fp32"] = errors(name, arrays, {**consts, "matmul_dtype": "float32"})
                row["bf16"] = errors(name, arrays, {**consts, "matmul_dtype": "bfloat16"})
            elif name == "adamw":
                row["fp32"] = errors(name, arrays, consts)
                row["bf16_not_applicable"] = "fp32 master weights and optimiser state by design"
            else:
                row["fp32"] = errors(name, arrays, consts)
                rounded = [arrays[0].astype(BF16), *arrays[1:]] if name.startswith("rope") else \
                    [a.astype(BF16) for a in arrays]  # RoPE's tables stay fp32
                row["bf16"] = errors(name, rounded, consts)
            log(f"accuracy: {name} {shapes}: fp32 {max(row['fp32']):.2e}"
                + (f", bf16 {max(row['bf16']):.2e}" if row["bf16"] else ""))
            rows.append(row)
    return {"tokens": tokens, "kernels": rows}


def format_accuracy(result: dict) -> str:
    lines = [f"kernel errors against float64 (max |kernel - float64| / max |float64| over each call's outputs; "
             f"{result['tokens']:,} positions at the activation kernels)",
             f"  {'kernel':<16}{'inputs':<40}{'matmul':<10}{'fp32':>10}{'bf16':>10}"]
    for r in result["kernels"]:
        bf16 = f"{max(r['bf16']):.2e}" if r["bf16"] else "n/a"
        lines.append(f"  {r['kernel']:<16}{' '.join('x'.join(map(str, s)) for s in r['inputs'])[:39]:<40}"
                     f"{r['matmul_dtype'] or '-':<10}{max(r['fp32']):>10.2e}{bf16:>10}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------- captured calls
def _np32(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float32).contiguous().numpy()


def kernel_inputs(op: str, args: tuple) -> list[tuple[str, list, dict]]:
    """The kernel calls (entry point, arrays, constants) a fused-op call `op(*args)` makes (its reference-impl
    arguments as `frontier.kernels.ops` passes them), laid out as the interpreted implementation lays them out."""
    if op == "rmsnorm":
        x, eps = args[0], args[1]
        eps = float(torch.finfo(x.dtype).eps) if eps is None else eps
        return [("rmsnorm_fwd", [_np32(x).reshape(-1, x.size(-1))], {"eps": eps})]
    if op == "rmsnorm_backward":
        x, dy, eps = args[0], args[1], args[2]
        eps = float(torch.finfo(x.dtype).eps) if eps is None else eps
        return [("rmsnorm_bwd", [_np32(x).reshape(-1, x.size(-1)), _np32(dy).reshape(-1, x.size(-1))], {"eps": eps})]
    if op in ("rotary", "rotary_backward"):
        x, cos, sin = args[0], args[1], args[2]
        B, T, H, hd = x.shape
        name = "rope_fwd" if op == "rotary" else "rope_bwd"
        return [(name, [_np32(x).reshape(B * T, H * hd), _np32(cos[:T]), _np32(sin[:T])], {})]
    if op == "relu2_mlp":
        x, w1, w2 = args[:3]
        return [("mlp_fwd", [_np32(x).reshape(-1, x.size(-1)), _np32(w1), _np32(w2)], {})]
    if op == "relu2_mlp_backward":
        x, w1, w2, dy = args[:4]
        return [("mlp_bwd", [_np32(x).reshape(-1, x.size(-1)), _np32(w1), _np32(w2),
                             _np32(dy).reshape(-1, dy.size(-1))], {})]
    if op == "head_softcap_cross_entropy":
        h, w, targets, cap = args[:4]
        return [("head_ce_fwd", [_np32(h), _np32(w), targets.detach().cpu().numpy().astype(np.int32)],
                 {"cap": float(cap)})]
    if op == "head_softcap_cross_entropy_backward":
        h, w, targets, lse, dloss, _kept, cap = args[:7]  # the kernel recomputes what the reference kept
        return [("head_ce_bwd", [_np32(h), _np32(w), targets.detach().cpu().numpy().astype(np.int32), _np32(lse),
                                 _np32(dloss)], {"cap": float(cap)})]
    if op == "newton_schulz":
        g, steps = args[0], args[1]
        out = []
        for m in _np32(g).reshape(-1, *g.shape[-2:]):
            out.append(("newton_schulz", [m], {"steps": int(steps)}))
        return out
    if op == "adamw_step":
        param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step = args[:10]
        sc = adamw_step_scalars(lr, int(step), beta1, beta2, weight_decay)
        return [("adamw", [_np32(t).reshape(-1) for t in (param, grad, m, v)] + [sc["step_size"], sc["inv_bc2"],
                                                                              sc["decay"]],
                 {"beta1": float(beta1), "beta2": float(beta2), "eps": float(eps)})]
    return []


RESCALE_NATS = 1.0  # a row's running max "moves" when it rises by >= 1 nat: its sum is rescaled by <= 1/e


def head_exercise(h: np.ndarray, w: np.ndarray, cap: float, vchunk: int) -> dict:
    """What these head inputs exercise: rows whose running max over vocabulary chunks of `vchunk` rises after the
    first chunk by RESCALE_NATS or more (the online rescaling multiplies the running sum by <= 1/e: a stale max or a
    missing rescale would show), the largest rise, and |tanh(l / cap)| (the softcap's saturation: its factor
    1 - t^2 on the gradient)."""
    t = np.tanh(h.astype(np.float64) @ w.astype(np.float64).T / cap)
    chunks = np.array_split(cap * t, list(range(vchunk, t.shape[1], vchunk)), axis=1)
    running = np.maximum.accumulate(np.stack([c.max(1) for c in chunks], 1), axis=1)
    rise = running[:, -1] - running[:, 0]
    moved = rise >= RESCALE_NATS
    return {"rows": int(t.shape[0]), "chunks": len(chunks), "rows_rescaled": int(moved.sum()),
            "rescaled_fraction": float(moved.mean()), "max_rise_nats": float(rise.max()),
            "max_abs_tanh": float(np.abs(t).max()), "fraction_abs_tanh_over_half": float((np.abs(t) > 0.5).mean()),
            "min_softcap_factor": float((1 - t * t).min())}


def verify_calls(calls: list[tuple[str, tuple]], vchunk: int = 128, log=print) -> dict:
    """Each captured fused-op call's kernels against float64, in fp32 and bf16 matmul operands (module docstring);
    the head's forward with vocabulary chunks of `vchunk`. Returns per kernel the largest error over its calls."""
    worst: dict = {}
    exercise = None
    for op, args in calls:
        for name, arrays, consts in kernel_inputs(op, args):
            modes = {"fp32": {}, "bf16": {}} if matmul_dtype(name) is None else {
                "fp32": {"matmul_dtype": "float32"}, "bf16": {"matmul_dtype": "bfloat16"}}
            if name.startswith("head_ce"):
                for mode in modes.values():
                    mode["vchunk"] = vchunk
                if name == "head_ce_fwd":
                    exercise = head_exercise(arrays[0], arrays[1], consts["cap"], vchunk)
            row = worst.setdefault(name, {"calls": 0, "fp32": 0.0, "bf16": None})
            row["calls"] += 1
            row["fp32"] = max(row["fp32"], max(errors(name, arrays, {**consts, **modes["fp32"]})))
            if matmul_dtype(name) is not None:
                row["bf16"] = max(row["bf16"] or 0.0, max(errors(name, arrays, {**consts, **modes["bf16"]})))
    for name, row in worst.items():
        log(f"verify: {name} ({row['calls']} calls): fp32 {row['fp32']:.2e}"
            + (f", bf16 {row['bf16']:.2e}" if row["bf16"] is not None else ""))
    if exercise:
        log(f"verify: head inputs: {exercise['rows_rescaled']} of {exercise['rows']} rows rescaled by <= 1/e after the "
            f"first of {exercise['chunks']} chunks (largest rise {exercise['max_rise_nats']:.2f} nats); max |tanh(l / "
            f"cap)| {exercise['max_abs_tanh']:.3f}, {exercise['fraction_abs_tanh_over_half']:.1%} of logits over 0.5")
    return {"kernels": worst, "head": exercise, "vchunk": vchunk}
