"""The kernel layer (frontier/kernels/ops.py, __init__.py): the fused ops as custom ops, their implementations,
the check before training, and the implementations a run records.

Tolerances:
- reference op against the eager PyTorch it replaced (F.rms_norm, the old Rotary, the old MLP, F.cross_entropy of
  the capped logits, torch.optim.AdamW): forwards are the same aten ops in the same order, so RoPE, the MLP
  forward and AdamW must be bit for bit; RMSNorm's and the MLP's backward and the head's log-sum-exp are written out
  by hand (autograd's kernels sum in another order), so they agree to fp32 rounding: 1e-5 relative to the largest
  value (fp32 eps is 1.2e-7; sums over a few hundred terms).
- interpreter against reference, through the ops and autograd: the kernels' own tests (test_nki_kernels*.py) bound
  them against float64 (fp32 kernels by torch's fp32 error, the bf16-operand kernels by torch's error under bf16
  autocast); here the check is that the op plumbing (layouts, flattening, which gradient goes where) is right. The
  ops run the kernels as Trn2 would, matmul operands in bf16, against the fp32 reference: RMSNorm and RoPE (no
  matmul) at 1e-5 / 1e-4 relative, the matmul ops at 2e-2 (their bf16 error is below 1e-2 normwise, measured up to
  4.9e-3 here), Newton-Schulz at 1e-1 (bf16 Newton-Schulz, torch's own included, lies 3-7% of the largest entry from
  float64; measured 1.8e-2 here); a transposed or mis-scaled gradient is off by O(1).
- whole runs: `--kernels reference` against the losses the code before this layer logged (tests/data, commit
  c750e75): 2e-6 relative (measured: at most 1 float32 ulp on 6 steps, 7.7e-8 relative; 1.5e-7 for `compile`, whose
  reference is traced into the compiled graph); the interpreter against
  the reference, same seed and steps: 2e-3 relative (the bf16 operands' rounding fed back through 3 optimiser
  steps: measured 1.9e-4 on the losses, 2.4e-4 on val_bpb; a wrong gradient moves them by more than 1e-2).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from frontier import kernels
from frontier.cli import main
from frontier.config import EMAConfig
from frontier.devices import select_device
from frontier.kernels import ops, reference
from frontier.recipes import resolve
from frontier.train.trainer import train

CPU = select_device("cpu")
BF16_OP = 2e-2  # the matmul ops' bf16 operands against the fp32 reference (module docstring)
BF16_RUN = 2e-3  # a 3-step run with them against the reference's
GOLDEN = json.loads((Path(__file__).parent / "data" / "losses_c750e75.json").read_text())


def _rel(a, b):
    a, b = a.detach(), b.detach()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------------------------------------------- reference
def test_rmsnorm_reference_matches_f_rms_norm():
    x = torch.randn(4, 7, 48, generator=_gen()).requires_grad_()
    dy = torch.randn(4, 7, 48, generator=_gen(1))
    x0 = x.detach().clone().requires_grad_()
    y0 = F.rms_norm(x0, (48,))
    y0.backward(dy)
    y = ops.rmsnorm(x)
    y.backward(dy)
    assert torch.equal(y, y0)  # the same aten op
    assert _rel(x.grad, x0.grad) < 1e-5


def test_rotary_reference_matches_the_rotation_and_its_transpose_exactly():
    x = torch.randn(2, 10, 3, 8, generator=_gen()).requires_grad_()
    dy = torch.randn(2, 10, 3, 8, generator=_gen(1))
    ang = torch.rand(16, 4, generator=_gen(2))
    cos, sin = ang.cos(), ang.sin()
    x0 = x.detach().clone().requires_grad_()
    c, s = cos[None, :10, None, :], sin[None, :10, None, :]
    a, b = x0.chunk(2, dim=-1)
    y0 = torch.cat([a * c + b * s, b * c - a * s], dim=-1)
    y0.backward(dy)
    y = ops.rotary(x, cos, sin)
    y.backward(dy)
    assert torch.equal(y, y0) and torch.equal(x.grad, x0.grad)


def test_relu2_mlp_reference_matches_the_modules():
    lin1, lin2 = torch.nn.Linear(24, 96, bias=False), torch.nn.Linear(96, 24, bias=False)
    x = torch.randn(3, 5, 24, generator=_gen()).requires_grad_()
    dy = torch.randn(3, 5, 24, generator=_gen(1))
    x0 = x.detach().clone().requires_grad_()
    y0 = lin2(F.relu(lin1(x0)).square())
    y0.backward(dy)
    g0 = (x0.grad, lin1.weight.grad.clone(), lin2.weight.grad.clone())
    lin1.weight.grad = lin2.weight.grad = None
    y = ops.relu2_mlp(x, lin1.weight, lin2.weight)
    y.backward(dy)
    assert torch.equal(y, y0)
    for got, want in zip((x.grad, lin1.weight.grad, lin2.weight.grad), g0):
        assert _rel(got, want) < 1e-5


def _head_case(n=37, d=16, v=29, e=5, seed=0):
    g = _gen(seed)
    h = torch.randn(n, d, generator=g).requires_grad_()
    w = (torch.randn(v, d, generator=g) * 0.5).requires_grad_()
    targets = torch.randint(0, v, (n,), generator=g)
    row = torch.randn(v, generator=g)
    toks = torch.randint(0, v, (n, e), generator=g)
    vals = torch.randn(n, e, generator=g).requires_grad_()
    return h, w, targets, row, toks, vals


def _head_eager(h, w, targets, cap, row=None, toks=None, vals=None, dense=None):
    """What GPT.forward computed before the op: capped logits, the bias, F.cross_entropy."""
    z = (h @ w.mT).float()
    z = cap * torch.tanh(z / cap)
    if row is not None:
        z = (z + row).scatter_add(-1, toks, vals)
    if dense is not None:
        z = z + dense
    return F.cross_entropy(z, targets, reduction="none")


@pytest.mark.parametrize("chunk_rows", [None, 8])  # one chunk, and chunks of 8 rows with a ragged last one
@pytest.mark.parametrize("with_bias", [False, True])
def test_head_ce_reference_matches_cross_entropy_of_the_capped_logits(monkeypatch, chunk_rows, with_bias):
    h, w, targets, row, toks, vals = _head_case()
    if chunk_rows:
        monkeypatch.setattr(reference, "CHUNK_ELEMENTS", chunk_rows * w.size(0))
    bias = dict(bias_row=row, bias_tokens=toks, bias_values=vals) if with_bias else {}
    leaves = [h, w] + ([vals] if with_bias else [])
    twins = [t.detach().clone().requires_grad_() for t in leaves]
    dloss = torch.rand(h.size(0), generator=_gen(3))
    want = _head_eager(twins[0], twins[1], targets, 15.0, *((row, toks, twins[2]) if with_bias else ()))
    want.backward(dloss)
    got = ops.head_softcap_cross_entropy(h, w, targets, 15.0, **bias)
    got.backward(dloss)
    assert _rel(got, want) < 1e-5
    for a, b in zip(leaves, twins):
        assert _rel(a.grad, b.grad) < 1e-5


def test_head_ce_dense_bias_scores_like_the_sparse_one():
    h, w, targets, row, toks, vals = _head_case()
    dense = row.expand(h.size(0), -1).clone().scatter_add(-1, toks, vals.detach())
    with torch.no_grad():
        a = ops.head_softcap_cross_entropy(h, w, targets, 15.0, bias_dense=dense)
        b = ops.head_softcap_cross_entropy(h, w, targets, 15.0, bias_row=row, bias_tokens=toks, bias_values=vals)
    assert _rel(a, b) < 1e-6


def test_newton_schulz_reference_is_muons():
    from frontier.optim.muon import newton_schulz

    g = torch.randn(3, 24, 40, generator=_gen())
    out = newton_schulz(g)
    assert torch.equal(out, reference.newton_schulz(g, 5))
    s = torch.linalg.svdvals(out)
    assert s.min() > 0.5 and s.max() < 1.5  # singular values pushed towards 1
    tall = torch.randn(40, 24, generator=_gen(1))
    assert torch.allclose(newton_schulz(tall), newton_schulz(tall.mT.contiguous()).mT, atol=1e-6)


def test_adamw_on_the_op_steps_bit_for_bit_like_torch():
    from frontier.optim.adamw import AdamW

    p0 = [torch.randn(7, 5, generator=_gen(i)).requires_grad_() for i in range(2)]
    p1 = [p.detach().clone().requires_grad_() for p in p0]
    kw = dict(lr=0.01, betas=(0.8, 0.95), eps=1e-10, weight_decay=0.1)
    ours, theirs = AdamW(p0, **kw), torch.optim.AdamW(p1, **kw)
    for step in range(4):
        for a, b in zip(p0, p1):
            g = torch.randn(a.shape, generator=_gen(10 + step))
            a.grad, b.grad = g.clone(), g.clone()
        ours.step(), theirs.step()
    for a, b in zip(p0, p1):
        assert torch.equal(a, b)
    theirs.load_state_dict(ours.state_dict())  # the same state layout: checkpoints load either way


# ---------------------------------------------------------------------------------------------------- the ops
def test_opcheck_every_op():
    """torch.library.opcheck: schema, fake functions, autograd registration and aliasing are consistent."""
    g = _gen()
    x = torch.randn(2, 8, 2, 16, generator=g, requires_grad=True)
    ang = torch.rand(8, 8, generator=g)
    h, w, targets, row, toks, vals = _head_case()
    p = torch.randn(33, generator=g)
    cases = [
        (ops._rmsnorm, (torch.randn(4, 16, generator=g, requires_grad=True), None, "reference")),
        (ops._rotary, (x, ang.cos(), ang.sin(), "reference")),
        (ops._relu2_mlp, (torch.randn(6, 16, generator=g, requires_grad=True),
                          torch.randn(64, 16, generator=g, requires_grad=True),
                          torch.randn(16, 64, generator=g, requires_grad=True), "reference")),
        (ops._head_ce, (h, w, targets, 15.0, "reference", row, toks, vals, None)),
        (ops._head_ce, (h, w, targets, 15.0, "reference", None, None, None, None)),
        (ops._newton_schulz, (torch.randn(2, 8, 12, generator=g), 5, "reference")),
        (ops._adamw_step, (p, torch.randn(33, generator=g), torch.zeros(33), torch.zeros(33), 0.01, 0.9, 0.95,
                           1e-8, 0.0, 1.0, "reference")),
    ]
    for op, args in cases:
        torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor", "test_autograd_registration",
                                                   "test_aot_dispatch_dynamic"))


def _compiled_graph_targets(impl):
    """Compile the smoke baseline with fullgraph=True under a backend that keeps the graph: (graphs, every
    call_function node's (target, args) in it and its nested subgraphs)."""
    from frontier.train.trainer import build_model

    cfg = resolve("baseline", "smoke", kernels=impl)
    model = build_model(cfg)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = torch.compile(model, backend=backend, fullgraph=True)
    x = torch.randint(0, cfg.model.vocab_size, (2, 16))
    kernels.reset_calls()
    compiled(x, x).backward()
    nodes = [(str(n.target), n.args) for _, m in graphs[0].named_modules() if hasattr(m, "graph")
             for n in m.graph.nodes if n.op == "call_function"] if graphs else []
    return cfg, graphs, nodes


def test_compiled_model_is_one_graph_with_one_node_per_op_call():
    """fullgraph=True with an opaque implementation (the interpreter): each op is one node, its backward another."""
    cfg, graphs, nodes = _compiled_graph_targets("interpreter")
    assert len(graphs) == 1
    targets = [t for t, _ in nodes]
    L = cfg.model.n_layer
    assert targets.count("frontier.rmsnorm.default") == 4 * L + 2  # pre-attn, pre-MLP, q, k per block; embed, head
    assert targets.count("frontier.rotary.default") == 2 * L
    assert targets.count("frontier.relu2_mlp.default") == L
    assert targets.count("frontier.head_softcap_cross_entropy.default") == 1


def test_compiled_cpu_reference_is_traced_through_and_counted_per_call_as_inlined():
    """On the CPU the reference is traced into the graph (no opaque op node), and every op call leaves a
    `frontier::count` node that counts it as it runs, forward and backward, as `reference (inlined ...)`."""
    cfg, graphs, nodes = _compiled_graph_targets("reference")
    assert len(graphs) == 1
    targets = [t for t, _ in nodes]
    assert not [t for t in targets if t.startswith("frontier.") and t != "frontier.count.default"]
    counted = [args[1] for t, args in nodes if t == "frontier.count.default"]
    L = cfg.model.n_layer
    assert counted.count("rmsnorm") == 4 * L + 2 and counted.count("rotary") == 2 * L
    assert counted.count("relu2_mlp") == L and counted.count("head_softcap_cross_entropy") == 1
    seen = kernels.calls()  # one compiled call, forward and backward, counted when it ran
    for op in ("rmsnorm", "rotary", "relu2_mlp", "head_softcap_cross_entropy"):
        n = counted.count(op)
        assert seen[op] == {ops.INLINED: n} and seen[f"{op}.backward"] == {ops.INLINED: n}
    assert seen[ops.LOGITS] == {"kept": 1}
    rec = kernels.implementations(cfg, observed=seen)
    assert rec["rmsnorm"] == "reference (inlined into the compiled graph)"


def test_the_head_keeps_its_logits_within_the_budget_and_recomputes_in_chunks_beyond(monkeypatch):
    """The memory budget decides: kept when N x V fits, recomputed chunk by chunk otherwise; same gradients both
    ways, and the count says which path ran."""
    gen = _gen(3)
    h, w = torch.randn(24, 16, generator=gen), torch.randn(40, 16, generator=gen) * 0.3
    targets = torch.randint(0, 40, (24,), generator=gen)
    grads = {}
    for budget in (24 * 40, 24 * 40 - 1):  # fits exactly; one element too many
        monkeypatch.setattr(reference, "KEEP_ELEMENTS", budget)
        monkeypatch.setattr(reference, "CHUNK_ELEMENTS", 24 * 40 if budget == 24 * 40 else 7 * 40)  # 7-row chunks
        hh, ww = h.clone().requires_grad_(), w.clone().requires_grad_()
        kernels.reset_calls()
        ops.head_softcap_cross_entropy(hh, ww, targets, 3.0).sum().backward()
        path = "kept" if budget == 24 * 40 else "recomputed"
        assert kernels.calls()[ops.LOGITS] == {path: 1}
        grads[path] = (hh.grad, ww.grad)
    for a, b in zip(grads["kept"], grads["recomputed"]):
        assert _rel(a, b) < 1e-5
    monkeypatch.undo()
    from frontier.profiles import get_profile

    shapes = {name: (get_profile(name).batch_size * get_profile(name).seq_len, get_profile(name).vocab_size)
              for name in ("cpu", "gpu")}
    assert reference.keeps_logits(*shapes["cpu"]) and not reference.keeps_logits(*shapes["gpu"]), shapes


# ---------------------------------------------------------------------------------------------------- interpreter
def _both(fn, leaves, dy):
    """fn(impl) with fresh leaf copies under reference and interpreter: (outputs, grads) per impl."""
    out = {}
    for impl in ("reference", "interpreter"):
        ls = [t.detach().clone().requires_grad_() for t in leaves]
        y = fn(impl, *ls)
        y.backward(dy)
        out[impl] = (y.detach(), [t.grad for t in ls])
    return out


@pytest.mark.parametrize("shape", [(2, 64, 2, 32), (3, 20, 3, 10)])  # smoke's q, and a ragged one
def test_interpreter_rmsnorm_and_rotary_through_the_ops(shape):
    x = torch.randn(*shape, generator=_gen())
    dy = torch.randn(*shape, generator=_gen(1))
    ang = torch.rand(shape[1], shape[3] // 2, generator=_gen(2))

    def fn(impl, t):
        return ops.rmsnorm(ops.rotary(t, ang.cos(), ang.sin(), impl), impl)

    r = _both(fn, [x], dy)
    assert _rel(r["interpreter"][0], r["reference"][0]) < 1e-5
    assert _rel(r["interpreter"][1][0], r["reference"][1][0]) < 1e-4


@pytest.mark.parametrize("n,d,f", [(512, 64, 256), (130, 40, 200)])
def test_interpreter_mlp_through_the_op(n, d, f):
    g = _gen()
    leaves = [torch.randn(n, d, generator=g), torch.randn(f, d, generator=g) * d**-0.5,
              torch.randn(d, f, generator=g) * f**-0.5]
    r = _both(lambda impl, x, w1, w2: ops.relu2_mlp(x, w1, w2, impl), leaves, torch.randn(n, d, generator=g))
    assert _rel(r["interpreter"][0], r["reference"][0]) < BF16_OP
    for a, b in zip(r["interpreter"][1], r["reference"][1]):
        assert _rel(a, b) < BF16_OP


@pytest.mark.parametrize("n,d,v", [(512, 64, 512), (200, 40, 300)])
def test_interpreter_head_ce_through_the_op(n, d, v):
    g = _gen()
    targets = torch.randint(0, v, (n,), generator=g)
    leaves = [torch.randn(n, d, generator=g), torch.randn(v, d, generator=g) * 0.3]
    dloss = torch.rand(n, generator=g)
    r = _both(lambda impl, h, w: ops.head_softcap_cross_entropy(h, w, targets, 15.0, impl), leaves, dloss)
    assert _rel(r["interpreter"][0], r["reference"][0]) < BF16_OP
    for a, b in zip(r["interpreter"][1], r["reference"][1]):
        assert _rel(a, b) < BF16_OP


def test_interpreter_optimiser_ops():
    g = torch.randn(2, 64, 96, generator=_gen())
    assert _rel(ops.newton_schulz(g, 5, "interpreter"), ops.newton_schulz(g, 5, "reference")) < 1e-1
    state = {impl: [torch.randn(300, generator=_gen(i)) for i in range(3)] for impl in ("reference", "interpreter")}
    for impl, (p, m, v) in state.items():
        v.abs_()
        for step in (1, 2, 3):
            ops.adamw_step(p, torch.randn(300, generator=_gen(9 + step)), m, v, 0.01, 0.8, 0.95, 1e-10, 0.1, step, impl)
    for a, b in zip(state["interpreter"], state["reference"]):
        assert _rel(a, b) < 1e-5


def test_interpreter_refuses_other_dtypes_rather_than_converting():
    from frontier.kernels.interpreter import UnsupportedError

    with pytest.raises(UnsupportedError, match="fp32"):
        ops.rmsnorm(torch.randn(4, 8, dtype=torch.float64), "interpreter")


def test_calls_are_counted_per_op_and_implementation():
    kernels.reset_calls()
    x = torch.randn(4, 8, requires_grad=True)
    ops.rmsnorm(x, "interpreter").sum().backward()
    ops.rmsnorm(x.detach(), "reference")
    assert kernels.calls() == {"rmsnorm": {"interpreter": 1, "reference": 1}, "rmsnorm.backward": {"interpreter": 1}}
    kernels.reset_calls()
    assert kernels.calls() == {}


# ---------------------------------------------------------------------------------------------------- runs
# The golden values were recorded with `ema`'s first weight average (start 0.5, half-life 0.15, the average alone);
# the recipe's constants moved since (frontier.recipes.EMA_*), so that average is handed to it here.
GOLDEN_EMA = {"ema": EMAConfig(0.5, 0.15, 1, 1.0)}


def _smoke_losses(recipe, kernels_impl, tmp_path, steps=6):
    rec = train(resolve(recipe, "smoke", kernels=kernels_impl, ema=GOLDEN_EMA.get(recipe)), _smoke_losses.data, tmp_path / f"{recipe}-{kernels_impl}",
                CPU, seed=0, steps=steps, progress=False, log=lambda *a: None)
    return rec


@pytest.mark.parametrize("recipe", ["baseline", "compile", "ema"])  # eager; compiled; bigram + n-gram + EMA
def test_reference_kernels_reproduce_the_losses_before_the_layer(tmp_path, recipe):
    from frontier.data.dataset import embedded_dataset

    data = embedded_dataset(512, log=lambda *a: None)
    if data.manifest_hash != GOLDEN["data_manifest_hash"]:
        pytest.skip("the embedded corpus differs on this Python (its docstrings are the corpus)")
    _smoke_losses.data = data
    rec = _smoke_losses(recipe, "reference", tmp_path)
    want = GOLDEN["recipes"][recipe]
    got = torch.tensor(rec["curve"]["train_loss"], dtype=torch.float64)
    assert _rel(got, torch.tensor(want["train_loss"], dtype=torch.float64)) < 2e-6
    assert abs(rec["val_bpb"] - want["val_bpb"]) / want["val_bpb"] < 2e-6


def test_interpreter_run_trains_every_op_in_the_interpreter_and_records_it(smoke_data, tmp_path):
    _smoke_losses.data = smoke_data
    ref = _smoke_losses("baseline", "reference", tmp_path, steps=3)
    rec = _smoke_losses("baseline", "interpreter", tmp_path, steps=3)
    observed = {op: impl for op, impl in rec["implementations"].items() if op.split(".")[0] in ops.OPS}
    assert set(observed) == set(ops.OPS) | {f"{op}.backward" for op in ("rmsnorm", "rotary", "relu2_mlp",
                                                                      "head_softcap_cross_entropy")}
    assert set(observed.values()) == {"interpreter"}  # the observed set is the requested one: nothing fell back
    assert set(ref["implementations"][op] for op in observed) == {"reference"}
    assert rec["config"]["train"]["kernels"] == "interpreter" and rec["config_hash"] != ref["config_hash"]
    a, b = (torch.tensor(r["curve"]["train_loss"]) for r in (rec, ref))
    assert _rel(a, b) < BF16_RUN
    assert abs(rec["val_bpb"] - ref["val_bpb"]) < BF16_RUN * ref["val_bpb"]


def test_cli_interpreter_run_end_to_end(tmp_path, capsys, smoke_data):
    rc = main(["train", "--recipe", "baseline", "--profile", "smoke", "--kernels", "interpreter", "--steps", "3",
               "--data", str(smoke_data.folder), "--out", str(tmp_path / "r"), "--no-progress"])
    assert rc == 0
    rec = json.loads((tmp_path / "r" / "result.json").read_text())
    assert rec["implementations"]["head_softcap_cross_entropy.backward"] == "interpreter"
    assert "kernels interpreter" in capsys.readouterr().out


def test_nki_without_neuron_is_refused_in_one_line_before_anything_is_written(tmp_path, capsys, smoke_data):
    rc = main(["train", "--recipe", "baseline", "--profile", "smoke", "--kernels", "nki", "--steps", "2",
               "--data", str(smoke_data.folder), "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert err[0].startswith("error: --kernels nki cannot run here: ") and "nki" in err[0]
    assert not (tmp_path / "r").exists()
    rc = main(["train", "--recipe", "baseline", "--profile", "smoke", "--kernels", "nki",  # a budget: no cost benched
               "--data", str(smoke_data.folder), "--out", str(tmp_path / "r")])
    out, err = capsys.readouterr()
    assert rc == 2 and "cannot run here" in err and "measuring it on this machine" not in out + err


def test_a_shape_a_kernel_refuses_stops_the_run_naming_the_op():
    """A model 1,040 wide: the MLP backward's PSUM tiles (dx and a dW1 row tile, each ceil(D / 512) banks, besides the
    transposes, h and dW2) no longer fit the 8 banks."""
    import dataclasses

    from frontier.errors import UserError

    cfg = resolve("baseline", "smoke", kernels="interpreter")
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, n_embd=1040))
    with pytest.raises(UserError, match=r"--kernels interpreter cannot run relu2_mlp: AssertionError: mlp_bwd: "
                                        r"D = 1040 leaves no F block that fits PSUM"):
        kernels.check(cfg, CPU)


def test_an_n_gram_run_trains_with_the_head_kernel_taking_the_bias(smoke_data, tmp_path):
    """Recipe `ngram` (bigram table + n-gram mix, compiled) with every fused op interpreted: the head kernel takes
    the bias dense and returns its gradient, from which the mixture's weights and scale learn."""
    _smoke_losses.data = smoke_data
    ref = _smoke_losses("ngram", "reference", tmp_path, steps=3)
    rec = _smoke_losses("ngram", "interpreter", tmp_path, steps=3)
    assert rec["implementations"]["head_softcap_cross_entropy.backward"] == "interpreter"
    a, b = (torch.tensor(r["curve"]["train_loss"]) for r in (rec, ref))
    assert _rel(a, b) < BF16_RUN
    assert abs(rec["val_bpb"] - ref["val_bpb"]) < BF16_RUN * ref["val_bpb"]
    assert rec["ngram"]["mixture"] != [round(1 / 17, 5)] * 17  # the bias's gradient reached the mixture


@pytest.mark.parametrize("n,d,v", [(512, 64, 512), (200, 40, 300)])
def test_interpreter_head_ce_with_the_n_gram_bias_through_the_op(n, d, v):
    g = _gen()
    targets = torch.randint(0, v, (n,), generator=g)
    row, toks = torch.randn(v, generator=g), torch.randint(0, v, (n, 6), generator=g)
    leaves = [torch.randn(n, d, generator=g), torch.randn(v, d, generator=g) * 0.3, torch.randn(n, 6, generator=g)]
    dloss = torch.rand(n, generator=g)

    def fn(impl, h, w, vals):
        return ops.head_softcap_cross_entropy(h, w, targets, 15.0, impl, bias_row=row, bias_tokens=toks,
                                              bias_values=vals)

    r = _both(fn, leaves, dloss)
    assert _rel(r["interpreter"][0], r["reference"][0]) < BF16_OP
    for a, b in zip(r["interpreter"][1], r["reference"][1]):
        assert _rel(a, b) < BF16_OP


def test_frontier_kernels_lists_every_op_and_implementation(capsys):
    assert main(["kernels"]) == 0
    out = capsys.readouterr().out
    for op in ops.OPS:
        assert f"{op}:" in out
    assert out.count("reference   frontier.kernels.reference") == len(ops.OPS)
    assert "cannot run here: the real `nki`" in out
    # the kernels at the trn2 shapes: instructions against the budget, matmul dtype, language check
    assert "per worker: 8 rows of 2,048 tokens" in out and "budget of 20,000" in out
    table = out[out.index("NKI kernels at these shapes"):].splitlines()[2:]
    assert len(table) == 14 and all(line.rstrip().endswith("passes") for line in table)  # RoPE: q and k alike
    assert sum("bfloat16" in line for line in table) == 7  # MLP and head, forward and backward; 3 Newton-Schulz


def test_a_compiled_model_runs_the_interpreted_kernels_inside_its_graph(smoke_data, tmp_path):
    """Recipe `bigram` (torch.compile + the sparse bigram table) with the kernels interpreted: the custom ops stay
    nodes of the compiled graph and run the interpreter at run time."""
    _smoke_losses.data = smoke_data
    rec = _smoke_losses("bigram", "interpreter", tmp_path, steps=2)
    assert rec["compile"]["frames_compiled_in_warmup"] >= 1
    assert rec["implementations"]["relu2_mlp.backward"] == "interpreter"
    assert rec["implementations"]["bigram_update"].startswith("sparse")
