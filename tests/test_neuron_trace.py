"""The kernels as the Neuron compiler sees them: on the trn2 path (`--kernels nki`) the model's traced code calls the
registered `nki_op` ops themselves, so `torch.compile` records each kernel as its own node and no opaque `frontier::`
op is left for the neuron backend to lower (frontier/kernels/ops.py).

The toolchain is the stand-in of tests/test_neuron_registration.py (an `nki_op` built on `torch.library.custom_op`, an
`nki` whose kernels run in the interpreter), launched at Trn2's degree (LNC=2). The backend records the graphs
AOTAutograd hands a compiler (forward and backward, what `backend="neuron"` receives) and runs them.
"""

from __future__ import annotations

import pytest
import torch
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd

from frontier import kernels
from frontier.kernels import interpreted, neuron as neuron_module, ops
from frontier.kernels.neuron import OP_OF, NeuronKernels, Toolchain
from frontier.recipes import get_recipe, resolve
from frontier.train.trainer import build_model
from test_kernel_ops import BF16_RUN  # the tolerance of a 3-step kernel run against the reference's
from test_neuron_registration import standin_kernel, standin_nki_op

NS = "frontier_nki_trace"
SIZES = dict(n_layer=2, n_embd=32, n_head=2, n_kv_head=2, seq_len=16, batch_size=2, vocab_size=96,
             eval_batch_size=2, bigram_rows=512, ngram_buckets_log2=10, ngram_seen_log2=12)


@pytest.fixture(scope="module")
def standin():
    return NeuronKernels(Toolchain(standin_nki_op, standin_kernel, "stand-in"), namespace=NS)


def _targets(gm):
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def _compile_and_step(fn, *args):
    """Run fn(*args) compiled (fullgraph, static shapes) under a backend that records the forward and backward
    graphs AOTAutograd produces, and its output's backward (a scalar's; none for an output without grad);
    returns ({"fw": graphs, "bw": graphs}, fn's output, detached)."""
    graphs = {"fw": [], "bw": []}

    def keep(kind):
        def compiler(gm, example_inputs):
            graphs[kind].append(gm)
            return make_boxed_func(gm.forward)
        return compiler

    torch._dynamo.reset()
    backend = aot_autograd(fw_compiler=keep("fw"), bw_compiler=keep("bw"))
    out = torch.compile(fn, backend=backend, fullgraph=True, dynamic=False)(*args)
    if out.requires_grad:
        out.backward()
    return graphs, out.detach()


def test_the_trn2_model_traces_to_the_nki_ops_themselves(standin, monkeypatch):
    monkeypatch.setattr(neuron_module, "_default", lambda: standin)
    cfg = resolve("compile", "trn2", kernels="nki", sizes=SIZES)
    torch.manual_seed(0)
    model = build_model(cfg)
    x = torch.randint(0, cfg.model.vocab_size, (2, cfg.train.seq_len))

    def step(idx):
        with torch.autocast("cpu", dtype=torch.bfloat16):  # trn2's policy: bf16 matmuls
            return model(idx, idx)

    kernels.reset_calls()
    graphs, loss = _compile_and_step(step, x)
    assert len(graphs["fw"]) == 1 and len(graphs["bw"]) == 1  # one graph each way: nothing broke the trace
    fw, bw = _targets(graphs["fw"][0]), _targets(graphs["bw"][0])
    everything = fw + bw
    assert not [t for t in everything if t.startswith("frontier.")]  # no opaque frontier:: op (nor frontier::count)
    L = cfg.model.n_layer
    want_fw = {"rmsnorm_fwd": 4 * L + 2, "rope_fwd": 2 * L, "mlp_fwd": L, "head_ce_fwd": 1}
    want_bw = {"rmsnorm_bwd": 4 * L + 2, "rope_bwd": 2 * L, "mlp_bwd": L, "head_ce_bwd": 1}
    for targets, want in ((fw, want_fw), (bw, want_bw)):
        for name, n in want.items():
            assert targets.count(f"{NS}.{name}.default") == n, (name, targets)
    nki_nodes = {t.split(".")[1] for t in everything if t.startswith(NS + ".")}
    assert nki_nodes == set(want_fw) | set(want_bw)
    # each kernel counted as it ran (in its op's body), forward and backward
    seen = kernels.calls()
    for name, n in {**want_fw, **want_bw}.items():
        assert seen[OP_OF[name]] == {"nki": n}
    assert seen[ops.LOGITS] == {"recomputed": 1}
    assert torch.isfinite(loss) and all(p.grad is not None for p in model.parameters() if p.requires_grad)


def test_the_n_gram_head_traces_to_the_bias_kernels(standin, monkeypatch):
    """With the n-gram mix the head takes a sparse bias: the kernels with the bias appear, and the bias's
    gradients flow back through them."""
    monkeypatch.setattr(neuron_module, "_default", lambda: standin)
    g = torch.Generator().manual_seed(0)
    N, D, V = 32, 32, 96
    h = torch.randn(N, D, generator=g, requires_grad=True)
    w = (torch.randn(V, D, generator=g) * 0.3).requires_grad_()
    t = torch.randint(0, V, (N,), generator=g)
    row, toks = torch.randn(V, generator=g), torch.randint(0, V, (N, 4), generator=g)
    vals = torch.randn(N, 4, generator=g, requires_grad=True)

    def step(h, w, vals):
        return ops.head_softcap_cross_entropy(h, w, t, 15.0, "nki", bias_row=row, bias_tokens=toks,
                                              bias_values=vals).mean()

    graphs, loss = _compile_and_step(step, h, w, vals)
    fw, bw = _targets(graphs["fw"][0]), _targets(graphs["bw"][0])
    assert f"{NS}.head_ce_bias_fwd.default" in fw and f"{NS}.head_ce_bias_bwd.default" in bw
    assert not [x for x in fw + bw if x.startswith("frontier.")]
    ref = ops.head_softcap_cross_entropy(h.detach(), w.detach(), t, 15.0, "reference", bias_row=row,
                                         bias_tokens=toks, bias_values=vals.detach()).mean()
    assert abs(float(loss) - float(ref)) < 1e-5 * abs(float(ref))
    assert vals.grad is not None and h.grad is not None and w.grad is not None


def test_the_optimiser_ops_trace_to_their_kernels(standin, monkeypatch):
    monkeypatch.setattr(neuron_module, "_default", lambda: standin)
    g = torch.randn(2, 24, 40, generator=torch.Generator().manual_seed(1))
    graphs, out = _compile_and_step(lambda m: ops.newton_schulz(m, 5, "nki"), g)
    fw = _targets(graphs["fw"][0])
    assert fw.count(f"{NS}.newton_schulz.default") == 2 and not [x for x in fw if x.startswith("frontier.")]
    assert torch.equal(out, interpreted.newton_schulz(g, 5))  # the same kernel, run by the same interpreter


# ---------------------------------------------------------------------------------------------------- a dry run
@pytest.fixture
def standin_neuron(standin, monkeypatch):
    """The trn2 machine as the trainer sees it, on this CPU: a native-Neuron DeviceInfo (bf16 autocast, the "neuron"
    compile backend) whose tensors live on the CPU; the stand-in toolchain registered; a "neuron" Dynamo backend that
    records each AOTAutograd graph and runs it (what neuronx-cc would compile)."""
    from torch._dynamo.backends import registry

    from frontier.devices import DeviceInfo

    monkeypatch.setattr(neuron_module, "_default", lambda: standin)
    monkeypatch.setattr(kernels, "availability", lambda impl, device=None: "")  # the SDK's presence, stood in
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    assert "neuron" not in registry._BACKENDS  # torch-neuronx registers the real one; not on this machine
    registry._BACKENDS["neuron"] = None
    registry._COMPILER_FNS["neuron"] = aot_autograd(fw_compiler=keep, bw_compiler=keep)
    yield DeviceInfo("neuron", "neuron-native", torch.device("cpu"), "bf16 autocast, fp32 master weights", "neuron",
                     {}), graphs
    del registry._COMPILER_FNS["neuron"], registry._BACKENDS["neuron"]
    kernels._CHECKED.clear()


BEST_EAGER = get_recipe("best").derive("best-eager", "the best recipe, not compiled", compile=False)


@pytest.mark.parametrize("recipe,head", [
    ("compile", ""),
    (BEST_EAGER, "_bias"),
    ("best", "_bias"),
], ids=["compile", "best-eager", "best"])
def test_a_trn2_dry_run_trains_through_the_stand_in_like_the_reference(standin_neuron, smoke_data, tmp_path, recipe,
                                                                       head):
    """`--profile trn2 --kernels nki` at reduced shapes for 3 steps: registration, kernels.check, the model compiled
    as the neuron backend compiles it (fullgraph) with graphs that hold the nki ops, the interpreter running them at
    LNC=2, the optimiser's Newton-Schulz and AdamW kernels; its losses against `--kernels reference` on the same
    device. Recipe `compile` (the baseline compiled); `best` (bigram, n-gram mix and EMA: the head kernels take the
    bias) eager and compiled (its n-gram bias an eager island beside the graph, as `frontier.train.compile` allows
    on the neuron backend)."""
    from frontier.train.trainer import train

    device, graphs = standin_neuron
    sizes = {**SIZES, "vocab_size": smoke_data.vocab_size, "log_every": 1}
    recs = {}
    for impl in ("reference", "nki"):
        cfg = resolve(recipe, "trn2", kernels=impl, sizes=sizes)
        graphs.clear()
        recs[impl] = train(cfg, smoke_data, tmp_path / impl, device=device, seed=0, steps=3, progress=False,
                           log=lambda *a: None)
        targets = [t for gm in graphs for t in _targets(gm)]
        if impl == "nki" and cfg.train.compile:
            assert not [t for t in targets if t.startswith("frontier.")]
            assert {t.split(".")[1] for t in targets if t.startswith(NS + ".")} >= {
                "rmsnorm_fwd", "rmsnorm_bwd", "rope_fwd", "rope_bwd", "mlp_fwd", "mlp_bwd", f"head_ce{head}_fwd",
                f"head_ce{head}_bwd"}
    ran = recs["nki"]["implementations"]
    for op in (*ops.OPS, "rmsnorm.backward", "rotary.backward", "relu2_mlp.backward",
               "head_softcap_cross_entropy.backward"):
        assert ran[op] == "nki", (op, ran[op])  # every op ran its kernel, counted as it ran: nothing fell back
        assert recs["reference"]["implementations"][op].startswith("reference")
    a, b = (torch.tensor(recs[i]["curve"]["train_loss"], dtype=torch.float64) for i in ("nki", "reference"))
    assert len(a) == len(b) == 3
    print("train losses", a.tolist(), b.tolist(), "val_bpb", recs["nki"]["val_bpb"], recs["reference"]["val_bpb"])
    assert float((a - b).abs().max() / b.abs().max()) < BF16_RUN
    assert abs(recs["nki"]["val_bpb"] - recs["reference"]["val_bpb"]) < BF16_RUN * recs["reference"]["val_bpb"]
