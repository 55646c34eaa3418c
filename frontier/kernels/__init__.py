"""The kernel layer: which implementation runs each fused op, whether it can, and what actually ran.

The fused ops (`frontier.kernels.ops`: rmsnorm, rotary, relu2_mlp, head_softcap_cross_entropy, newton_schulz,
adamw_step) each have three implementations: `reference` (PyTorch), `interpreter` (the NKI kernel's source in the
project's NumPy interpreter, any machine, slow) and `nki` (the kernel on a NeuronCore). A run picks one for all of
them (`--kernels`, `TrainConfig.kernels`: part of its config and hash; default `nki` on a Neuron device,
`reference` elsewhere).

Nothing falls back. `check(cfg, device)` runs before training and stops a run whose implementation cannot run here
with one line naming the op and the reason: no Neuron device or no real `nki` (for `nki`), a dtype or shape a kernel
does not take. For the kernel implementations it calls every op
once at the run's shapes (forward and backward), so a kernel that fails to compile or refuses a shape fails there,
not mid-run. The run record's `implementations` are counted as the ops run (`ops.calls()`), not copied from here.
Under torch.compile on the CPU the reference is traced into the compiled graph and recorded as
`reference (inlined into the compiled graph)`, still counted per call as it runs (`ops`' docstring).

Attention is not a fused op of ours: SDPA on CPU and CUDA (the vendor's kernel behind it on Neuron), recorded as such.

`frontier kernels` lists, besides these rows, every kernel call of a step at the trn2 shapes of one worker
(`frontier.kernels.verify.inventory`): instructions emitted against the budget, matmul dtype, language check.

Where things are: `ops` (the custom ops), `reference` (PyTorch), `interpreted` and `interpreter/` (the kernels run
by the project's NKI interpreter), `neuron` (on a NeuronCore), `nki/` (the kernels' source). The layer may import
only `frontier.config`, `frontier.devices` and `frontier.errors`: it serves the model and never depends on it.
"""

from __future__ import annotations

import torch

from ..config import RunConfig
from ..errors import UserError
from .ops import IMPLEMENTATIONS, INLINED, LOGITS, OPS, calls, reset_calls

REFERENCE = "reference"

# op -> what it computes, and its kernel in frontier/kernels/nki/
OP_INFO = {
    "rmsnorm": ("x * rsqrt(mean(x^2) + eps), no weight", "rmsnorm.rmsnorm_fwd / rmsnorm_bwd"),
    "rotary": ("RoPE of q and k (rotate-half)", "rotary.rope_fwd / rope_bwd"),
    "relu2_mlp": ("relu(x W1^T)^2 W2^T", "relu2_mlp.mlp_fwd / mlp_bwd"),
    "head_softcap_cross_entropy": ("cap tanh(h W^T / cap) (+ n-gram bias) -> cross-entropy, chunked",
                                   "head_ce.head_ce_fwd / head_ce_bwd"),
    "newton_schulz": ("Muon's 5 quintic Newton-Schulz iterations", "newton_schulz.newton_schulz"),
    "adamw_step": ("one AdamW step in place", "adamw.adamw"),
}


def default_for(device) -> str:
    """`nki` on a native Neuron device, `reference` elsewhere."""
    return "nki" if getattr(device, "backend", None) == "neuron-native" else REFERENCE


def availability(impl: str, device=None) -> str:
    """'' when `impl` can run on `device` (None: this machine's default), else why not."""
    if impl == REFERENCE:
        return ""
    if impl == "interpreter":
        try:
            import ml_dtypes  # noqa: F401  (bf16 in the interpreter)
        except ImportError:
            return "the interpreter needs ml_dtypes (pip install ml_dtypes)"
        return ""
    if impl == "nki":
        from .interpreter import find_real_nki

        nki, why = find_real_nki()
        if nki is None:
            return why
        if device is None:
            from ..devices import select_device

            try:
                device = select_device("neuron")
            except UserError as e:
                return str(e)
        if getattr(device, "backend", None) != "neuron-native":
            return (f"the NKI kernels run on a NeuronCore through native TorchNeuron; this run's device is "
                    f"{getattr(device, 'backend', device)}")
        from .neuron import find_toolchain  # torch_neuronx.nki_op, detected by what it offers

        toolchain, why = find_toolchain()
        return why
    return f"unknown implementation {impl!r} (choose one of {', '.join(IMPLEMENTATIONS)})"


def _refuse(impl: str, op: str | None, why: str):
    raise UserError(f"--kernels {impl} cannot run {op}: {why}" if op else f"--kernels {impl} cannot run here: {why}",
                    "use --kernels reference")


_CHECKED: set = set()  # (config hash, device) pairs that passed `check` in this process


def check(cfg: RunConfig, device) -> None:
    """Refuse, before training, a config whose kernel implementation cannot run every fused op here."""
    impl = cfg.train.kernels
    if impl not in IMPLEMENTATIONS:
        raise UserError(f"unknown kernel implementation {impl!r}", f"choose one of {', '.join(IMPLEMENTATIONS)}")
    if impl == REFERENCE or not cfg.model.network:
        return
    key = (cfg.digest(), str(device.device), device.backend)
    if key in _CHECKED:
        return
    why = availability(impl, device)
    if why:
        _refuse(impl, None, why)
    if device.autocast_dtype is not None and impl == "interpreter":
        _refuse(impl, None, f"the interpreted kernels are fp32 and this device computes in {device.dtype_policy}")
    for op, run in op_cases(cfg, device.device):
        try:
            run(impl)
        except Exception as e:  # a shape or dtype the kernel refuses, or a compile failure: name it, stop
            msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            _refuse(impl, op, f"{type(e).__name__}: {msg}")
    reset_calls()
    _CHECKED.add(key)


def op_cases(cfg: RunConfig, device):
    """(op, fn(impl) -> [tensors]) calling each op once on random data at `cfg`'s shapes, forward and backward
    (the training batch; the evaluation batch too for the head), and the optimiser ops at the model's matrix
    shapes. Each fn draws its inputs from its own seeded generator, so two implementations get the same inputs;
    it returns the outputs and input gradients, to compare implementations (`frontier.study.census`)."""
    from . import ops

    m, t = cfg.model, cfg.train
    B, T, D, H, hd, F, V = t.batch_size, t.seq_len, m.n_embd, m.n_head, m.head_dim, m.mlp_ratio * m.n_embd, m.vocab_size
    N = B * T

    def rand(gen, *shape, scale=1.0, grad=False):
        x = (torch.randn(*shape, generator=gen) * scale).to(device)
        return x.requires_grad_() if grad else x

    def backward(out, *inputs):
        out.backward(torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(device))
        return [out.detach(), *(i.grad for i in inputs)]

    def rmsnorm(impl):
        gen, out = torch.Generator().manual_seed(0), []
        for shape in ((B, T, D), (B, T, H, hd)):
            x = rand(gen, *shape, grad=True)
            out += backward(ops.rmsnorm(x, impl), x)
        return out

    def rotary(impl):
        gen, out = torch.Generator().manual_seed(0), []
        ang = torch.rand(T, hd // 2, generator=gen).to(device)
        for heads in sorted({H, m.n_kv_head}):
            x = rand(gen, B, T, heads, hd, grad=True)
            out += backward(ops.rotary(x, ang.cos(), ang.sin(), impl), x)
        return out

    def relu2_mlp(impl):
        gen = torch.Generator().manual_seed(0)
        x, w1 = rand(gen, B, T, D, grad=True), rand(gen, F, D, scale=D**-0.5, grad=True)
        w2 = rand(gen, D, F, scale=F**-0.5, grad=True)
        return backward(ops.relu2_mlp(x, w1, w2, impl), x, w1, w2)

    def head_softcap_cross_entropy(impl):
        """With the n-gram mix: a training batch's sparse bias (a row and 8 corrections per position, their
        gradients checked too) and the evaluation's dense one."""
        gen, out = torch.Generator().manual_seed(0), []
        for n, kind in sorted({(N, "train"), (t.eval_batch_size * T, "eval")}):
            w, h = rand(gen, V, D, scale=0.02, grad=True), rand(gen, n, D, grad=True)
            targets = torch.randint(0, V, (n,), generator=gen).to(device)
            bias, leaves = {}, [h, w]
            if m.ngram is not None and kind == "train":
                vals = rand(gen, n, 8, grad=True)
                bias = dict(bias_row=rand(gen, V), bias_tokens=torch.randint(0, V, (n, 8), generator=gen).to(device),
                            bias_values=vals)
                leaves.append(vals)
            elif m.ngram is not None:
                bias = dict(bias_dense=rand(gen, n, V))
            out += backward(ops.head_softcap_cross_entropy(h, w, targets, m.logit_softcap, impl, **bias), *leaves)
        return out

    def newton_schulz(impl):
        gen = torch.Generator().manual_seed(0)
        shapes = sorted({(D, D), (F, D), (D, F), (m.n_kv_head * hd, D)})
        return [ops.newton_schulz(rand(gen, 2, *shape), cfg.optim.ns_steps, impl) for shape in shapes]

    def adamw_step(impl):
        gen = torch.Generator().manual_seed(0)
        p, g, mom = rand(gen, V * D + 5), rand(gen, V * D + 5), rand(gen, V * D + 5)
        var = rand(gen, V * D + 5).abs()
        ops.adamw_step(p, g, mom, var, 1e-3, *cfg.optim.adam_betas, cfg.optim.adam_eps, cfg.optim.weight_decay, 1,
                       impl)
        return [p, mom, var]

    fns = (rmsnorm, rotary, relu2_mlp, head_softcap_cross_entropy, newton_schulz, adamw_step)
    return [(fn.__name__, fn) for fn in fns]


def components(cfg: RunConfig, device=None) -> dict[str, str]:
    """What runs the parts that are not fused ops of this layer (attention, the bigram update, the n-gram bias)."""
    out = {}
    if cfg.model.network:
        out["attention"] = ("sdpa (torch.nn.functional.scaled_dot_product_attention; the vendor's kernel on Neuron)")
    if cfg.model.bigram is not None:
        u = cfg.model.bigram.update
        out["bigram_update"] = f"{u} ({'torch.optim.AdamW' if u == 'dense' else 'frontier.optim.bigram_update.SparseRowAdam'})"
    if cfg.model.ngram is not None:
        out["ngram_bias"] = "reference (frontier.model.ngram, eager)"
    return out


def implementations(cfg: RunConfig, device=None, observed: dict | None = None) -> dict[str, str]:
    """op -> the implementation that ran, as a run record stores it: for the fused ops, read from `observed`
    (`ops.calls()`: several names joined with '+' if more than one ran; absent if it never ran), plus
    `components`."""
    observed = calls() if observed is None else observed
    out = {op: "+".join(sorted(impls)) for op, impls in observed.items()}
    if cfg.train.compile_optimizer and "newton_schulz" in out and INLINED not in out["newton_schulz"]:
        out["newton_schulz"] += " (inside a compiled Muon step)"
    if LOGITS in out:  # the head's backward: which path ran, and the budget that chose it
        from .reference import KEEP_ELEMENTS

        out[LOGITS] = (" and ".join(f"{path} in {n} backward{'s' if n != 1 else ''}"
                                    for path, n in sorted(observed[LOGITS].items()))
                       + f" (kept when the logits have at most {KEEP_ELEMENTS} fp32 elements)")
    return {**out, **components(cfg, device)}


def status(device=None) -> list[dict]:
    """One row per op and implementation: can it run here, and why not (`frontier kernels`)."""
    rows = []
    why = {impl: availability(impl, device) for impl in IMPLEMENTATIONS}
    for op in OPS:
        what, kernel = OP_INFO[op]
        for impl in IMPLEMENTATIONS:
            source = "frontier.kernels.reference" if impl == REFERENCE else f"frontier/kernels/nki/{kernel}"
            rows.append({"op": op, "what": what, "impl": impl, "source": source, "runs_here": not why[impl],
                         "why_not": why[impl]})
    return rows


__all__ = ["IMPLEMENTATIONS", "INLINED", "LOGITS", "OPS", "OP_INFO", "REFERENCE", "availability", "calls", "check", "components",
           "default_for", "implementations", "op_cases", "reset_calls", "status"]
