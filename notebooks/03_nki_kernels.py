# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: tags,jupyter,-all
#     notebook_metadata_filter: -jupytext.text_representation.jupytext_version
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Chapter 3: NKI kernels
#
# After `torch.compile`, the write-up wrote its own kernels in NKI, the Neuron Kernel Interface: fused versions of
# operations that PyTorch runs as strings of small ops, each a round trip to the chip's HBM (attention stayed the
# vendor's flash kernel). A kernel changes how fast the same arithmetic runs on a NeuronCore, not what it computes,
# and this book runs without a NeuronCore. So the chapter asks what the kernels do on Trainium and why it should pay,
# and how much of that can be checked here.
#
# What it found is in the box below, which its last section writes from the runs it quotes.

# %% tags=["parameters"]
profile = "cpu"
run_root = None      # None: the repository's runs/
figures_dir = None   # None: the repository's figures/
data = None          # None: the profile's corpus; or a folder made by `frontier prepare`

# %%
from frontier.study.chapter import setup

ch = setup(profile, run_root, figures_dir, data)
box = ch.box()

# %% [markdown]
# ## A kernel, run
#
# The model's fused ops (`frontier.kernels.ops`: RMSNorm, RoPE, the ReLU² MLP, the head with its softcap and
# cross-entropy, Muon's Newton-Schulz, AdamW) each have three implementations: `reference` (PyTorch), `nki` (the
# kernel on a NeuronCore, through torch-neuronx's `nki_op`) and `interpreter`: the same kernel source run by the
# project's own NKI interpreter in NumPy, on any machine. The interpreter is a test double of NKI 0.7 (Neuron SDK
# 2.33): it holds a kernel to what the documentation states (128 partitions, SBUF and PSUM capacity, which engine
# takes which operands, the language rules) and refuses what breaks them, and it counts what the kernel does.
#
# The smallest kernel is RMSNorm, y = x · rsqrt(mean(x²) + ε) per token. Tokens go on the 128 partitions, the whole
# width along the free dimension, so the row's sum stays inside a partition. A tile is read from HBM once by DMA,
# ScalarE squares and sums it in one instruction and takes the rsqrt in a second, VectorE scales the row, and one DMA
# writes it back. Trn2 compiles for two physical cores per logical core (LNC=2), and the kernel divides its tiles
# between them by `nl.program_id`:

# %%
from IPython.display import Markdown, display

from frontier.kernels import interpreted
from frontier.study import report

rms = interpreted.kernels("rmsnorm")  # the kernel's unmodified source, loaded with the interpreter's `nki`
display(Markdown(report.source_of(rms.rmsnorm_fwd.fn, rms._rstd, rms._core_tiles)))

# %% [markdown]
# Run at LNC=2 on 300 tokens (tiles of 128, 128 and 44 rows: one core takes the first, the other the rest), forward
# and backward, against the reference op and its autograd:

# %%
import numpy as np
import torch

from frontier.kernels import interpreted, ops
from frontier.kernels.interpreter import run
from frontier.kernels.toolchain import LNC

rms = interpreted.kernels("rmsnorm")
gen = torch.Generator().manual_seed(0)
x = torch.randn(300, ch.profile.n_embd, generator=gen)
dy = torch.randn(x.shape, generator=gen)
eps = torch.finfo(x.dtype).eps
y, fwd = run(rms.rmsnorm_fwd[LNC], x.numpy(), eps=eps)  # launched as Trn2 launches it: two cores, one HBM
dx, bwd = run(rms.rmsnorm_bwd[LNC], x.numpy(), dy.numpy(), eps=eps)

xr = x.clone().requires_grad_()
yr = ops.rmsnorm(xr, "reference")
yr.backward(dy)
print(f"forward:  max |kernel - reference| = {np.abs(y - yr.detach().numpy()).max():.1e} "
      f"(largest |y| {yr.abs().max():.2f})")
print(f"backward: max |kernel - reference| = {np.abs(dx - xr.grad.numpy()).max():.1e} "
      f"(largest |dx| {xr.grad.abs().max():.2f})")

# %% [markdown]
# What the interpreter counted, beside what the reference does with the same call. The reference's body, traced on
# PyTorch's `meta` device (shapes only), issues one aten op after another; on a device that does not fuse them each
# reads its inputs from HBM and writes its output back (`frontier.study.roofline.reference_work`):

# %%
import torch

from frontier.study import report
from frontier.study.roofline import reference_work

rows = []
with torch.device("meta"):
    xm = torch.empty(x.shape)
ref = {"rmsnorm_fwd": reference_work(torch.ops.frontier.rmsnorm.default, (xm, None, "reference"), {}),
       "rmsnorm_bwd": reference_work(torch.ops.frontier.rmsnorm_backward.default, (xm, xm, None, "reference"), {})}
for name, c in (("rmsnorm_fwd", fwd), ("rmsnorm_bwd", bwd)):
    r = ref[name]
    rows.append({"call": name, "kernel: HBM bytes": c.hbm_read_bytes + c.hbm_write_bytes,
                 "DMAs": c.dma_transfers,
                 "instructions (tensor, vector, scalar, gpsimd)": ", ".join(str(v) for v in c.instructions.values()),
                 "LNC conflicts": c.lnc_conflicts, "peak SBUF B/partition": c.peak_sbuf_bytes,
                 "reference: aten ops": f"{sum(r.ops.values())} ({', '.join(r.ops)})",
                 "reference: HBM bytes": int(r.work.hbm_bytes)})
display(Markdown(report.markdown_table(rows, list(rows[0]), {"kernel: HBM bytes": ",", "reference: HBM bytes": ","})))
print(f"x is {x.numel() * 4:,} bytes; the forward kernel moves x in and y out, once each")

# %% [markdown]
# The kernel moves each byte once (x in, y out; the backward also reads dy, and recomputes rstd rather than saving
# it); the reference's chain of ops moves several times as much. No HBM byte is written by both cores (0 conflicts:
# the interpreter counts every byte one core writes that the other touches between two barriers). The test suite runs
# the same check for every kernel, at LNC=1 and 2, forward and backward (`tests/test_nki_kernels.py`); bytes moved
# are what the next section prices.

# %% [markdown]
# ## Where a step's time goes on Trn2 (predicted)
#
# `frontier.study.roofline` traces one training step (forward, backward and the optimiser) on the `meta` device and
# sees every op as it is dispatched. For each fused call it counts both ways, as the section above did for RMSNorm:
# the reference's aten ops, each a round trip to HBM (matmul FLOPs from `torch.utils.flop_counter`'s formulas, other
# ops streaming their elements through VectorE, or ScalarE for exp, tanh, rsqrt and the like), and the kernel run
# once in the interpreter on random tensors of the same shapes. The glue that is not a fused op (projections,
# residual adds, the embedding) counts the same aten way in both columns, and attention is the vendor's flash
# kernel in both, modelled from flop_counter's SDPA formula.
#
# Counts become seconds on one NeuronCore-v3 at its published figures (`[I]` marks an assumption where the
# documentation gives no number):
#
# $$t_\text{TensorE} = \frac{\text{matmul FLOPs}}{\text{peak (bf16 or fp32)}} + \frac{64\ \text{cycles} \times \text{instructions}}{2.4\ \text{GHz}}\ [I],\qquad
#   t_\text{DMA} = \frac{\text{HBM bytes}}{368\ \text{GB/s}} + \frac{1.3\ \mu\text{s} \times \text{transfers}}{16\ \text{queues}}$$
# $$t_\text{VectorE} = \frac{\text{free elements} / 2 + 64 \times \text{instructions}}{0.96\ \text{GHz}},\quad
#   t_\text{ScalarE} = \frac{\text{free elements} + 64 \times \text{instructions}\ [I]}{1.2\ \text{GHz}},\quad
#   t_\text{unit} = \max(t_\text{TensorE}, t_\text{VectorE}, t_\text{ScalarE}, t_\text{GpSimd}, t_\text{DMA})$$
#
# "Free elements" are per partition (the 128 lanes of an engine work in parallel). A unit is one kernel call or one
# aten op of a reference; the step is the sum of its units. Taking the max inside a unit assumes its engines overlap
# perfectly, so every time is a lower bound, for the reference as for the kernel. **These are predictions from
# counted bytes and FLOPs, not measurements**: no Trainium made them. The kernels' matmul operands are bf16 (fp32
# accumulation), so the kernels' peak is TensorE's bf16 rate; the fp32 rate is shown beside it.
#
# At the `trn2` profile's shapes (10 layers of width 640, 32 × 2,048 tokens a step, vocabulary 8,192) the count runs
# the interpreter over every kernel for minutes, so the chapter reads the record `frontier kernels --roofline trn2`
# wrote, or makes it where there is none (a dry-run profile, `smoke` or `trn2-dry`, predicts its own tiny shapes in
# seconds):

# %%
from IPython.display import Markdown, display

from frontier.study import report
from frontier.study.roofline import PEAKS, format_roofline, roofline_record

at = ch.profile.name if ch.profile.dry_run else "trn2"
roof = roofline_record(at, ch.root / at / "bench", log=ch.log)
print(", ".join(f"TensorE {k} {v / 1e12:.0f} TFLOP/s" for k, v in PEAKS.tensor_flops.items()))
print(format_roofline(roof))

# %% [markdown]
# Each row sums a fused op's calls in one step. The kernels do as many matmul FLOPs as the reference or more (the
# head's and the MLP's backward recompute their forward tiles instead of reading them back, and a TensorE transpose
# counts as the identity matmul it is) and move a fraction of its bytes. The step on one core, divided by a chip's 8
# physical cores (the `trn2` profile trains data-parallel on the chip's 4 logical cores, and each kernel divides its
# work between a logical core's 2; ideal scaling, the gradients' all-reduce left out), at both TensorE peaks:

# %%
budget = roof["budget_s"]
table = []
for peak, p in roof["predictions"].items():
    table.append({"matmuls at": peak + (" (the kernels')" if peak == roof["kernel_matmul_peak"] else ""),
                  "step ms, reference": p["chip_step_s"]["reference"] * 1e3,
                  "step ms, kernels": p["chip_step_s"]["kernel"] * 1e3,
                  "speed-up": p["speedup"], "tokens/s, reference": p["chip_tokens_per_s"]["reference"],
                  "tokens/s, kernels": p["chip_tokens_per_s"]["kernel"],
                  f"steps in {budget:,.0f} s, reference": p["steps_in_budget"]["reference"],
                  f"steps in {budget:,.0f} s, kernels": p["steps_in_budget"]["kernel"]})
display(Markdown(report.markdown_table(table, list(table[0]), {
    "step ms, reference": ".4g", "step ms, kernels": ".4g", "speed-up": ".2f", "tokens/s, reference": ",.0f",
    "tokens/s, kernels": ",.0f", f"steps in {budget:,.0f} s, reference": ",.0f",
    f"steps in {budget:,.0f} s, kernels": ",.0f"})))
for peak, p in roof["predictions"].items():
    for r in p["rows"]:
        if r["kernel_s"] > r["ref_s"]:
            print(f"at the {peak} peak `{r['op']}` is predicted slower with its kernel ({r['kernel_s'] * 1e3:.1f} "
                  f"against {r['ref_s'] * 1e3:.1f} ms): {r['kernel_flops'] / max(r['ref_flops'], 1):.2f}x the "
                  f"reference's matmul FLOPs to move {r['kernel_bytes'] / max(r['ref_bytes'], 1):.2f}x its bytes, "
                  f"and TensorE bounds the unit")

# %% [markdown]
# Where the saving comes from, op by op (at the kernels' peak), and the step it adds up to:

# %%
from frontier.figures import new_figure

peak = roof["kernel_matmul_peak"]
rows = sorted(roof["predictions"][peak]["rows"], key=lambda r: r["ref_s"])
fig, axes = new_figure(12.0, 4.6, ncols=3, width_ratios=[3, 3, 1.5])
ys = range(len(rows))
for ax, key, scale, label in ((axes[0], "s", 1e3, "predicted ms per step on one core\n(axis from zero)"),
                              (axes[1], "bytes", 1e-9, "HBM GB per step on one core\n(axis from zero)")):
    ax.barh([y + 0.2 for y in ys], [r["ref_" + key] * scale for r in rows], height=0.4, label="PyTorch reference")
    ax.barh([y - 0.2 for y in ys], [r["kernel_" + key] * scale for r in rows], height=0.4, label="NKI kernels")
    ax.set_yticks(list(ys), [r["op"] for r in rows] if ax is axes[0] else [""] * len(rows), fontsize=8)
    ax.set_xlabel(label)
axes[0].legend(fontsize=8, loc="lower right")
s = roof["shapes"]
axes[0].set_title(f"one NeuronCore-v3, {s['n_layer']} x {s['n_embd']}, matmuls at {peak}", fontsize=10)
axes[1].set_title(f"{s['tokens']:,} tokens a step (a cost model, not measured)", fontsize=10)
peaks = list(roof["predictions"])
for i, p in enumerate(peaks):
    chip = roof["predictions"][p]["chip_step_s"]
    axes[2].bar([i - 0.2], [chip["reference"] * 1e3], width=0.4, color="C0")
    axes[2].bar([i + 0.2], [chip["kernel"] * 1e3], width=0.4, color="C1")
axes[2].set_xticks(range(len(peaks)), [f"matmuls\nat {p}" for p in peaks], fontsize=8)
axes[2].set_ylabel("predicted ms per step, one chip\n(8 cores, ideal; axis from zero)")
axes[2].set_title("the step", fontsize=10)
ch.figure(fig, "03_roofline")  # figures/03_roofline_PROFILE.png

# %% [markdown]
# The normalisations, RoPE and the head are where fusing pays most: their references are chains of elementwise ops
# that each stream whole activations through HBM, and the kernels keep the chain in SBUF (RMSNorm's backward: 92
# against 21 GB a step on one core, in the committed record `runs/trn2/bench/roofline-trn2+10x640-20261204-221156.json`).
# The MLP's backward is the exception: its kernel recomputes the hidden activation instead of reading it back (1.36x
# the reference's matmul FLOPs for 0.38x its bytes), and where TensorE bounds the unit that trade does not pay. Two
# things the model cannot see decide the real gain: how well the compiler fuses the reference's small ops on its own
# (the reference column credits it with none), and how well the kernels overlap their engines (the model assumes
# perfectly).

# %% [markdown]
# ## The fused head, measured here
#
# One saving needs no NeuronCore. The head computes, for hidden states h (N × D) and the head's weight W (V × D),
# l = h Wᵀ, z = c·tanh(l / c), and the loss log Σ exp(z) − z_target per position. Done plainly, the N × V logits
# exist whole in fp32, and autograd keeps several tensors of that size for the backward (the logits, their tanh, the
# log-softmax). The kernel never writes them to HBM: it streams the vocabulary past in chunks of 512 columns with an
# online log-sum-exp and recomputes each tile in the backward. The op's PyTorch reference does the same at a coarser
# grain, rows in chunks of `CHUNK_ELEMENTS` = 2²⁴ logits (64 MiB), recomputed in the backward; where the logits fit
# one chunk it keeps their tanh instead. On a small tensor the two ways give the same loss and gradients:

# %%
import torch

from frontier.kernels import ops
from frontier.kernels.reference import CHUNK_ELEMENTS
from frontier.study.bench_head import CAP, make_inputs, plain_head_ce

n, d, v = 1_024, 32, 32_768  # 2^25 logits: two chunks
x = make_inputs(n, d, v, bias=False)
plain = plain_head_ce(x["hidden"], x["w"], x["targets"], CAP)
plain_grads = torch.autograd.grad(plain, (x["hidden"], x["w"]))
fused = ops.head_softcap_cross_entropy(x["hidden"], x["w"], x["targets"], CAP, "reference").mean()
fused_grads = torch.autograd.grad(fused, (x["hidden"], x["w"]))
print(f"{n * v:,} logits = {n * v / CHUNK_ELEMENTS:g} chunks of {CHUNK_ELEMENTS:,}; "
      f"loss {plain:.6f} (plain) vs {fused:.6f} (fused); largest gradient difference "
      f"{max((a - b).abs().max().item() for a, b in zip(plain_grads, fused_grads)):.1e}")

# %% [markdown]
# `frontier bench-head` (`frontier.study.bench_head`) times the forward and backward of the mean loss, plain against
# fused, alternating in one process (median of 3 rounds), and measures each one's peak memory in a fresh process:
# the resident memory it adds over its inputs (the gradients of h and W, which both make, included). The n-gram bias
# is off and on (on: every position gets a bias row and 8 scattered corrections, as an `ngram` training batch does).
# At the `cpu` profile's shapes the logits are 4,096 × 1,024 (16 MiB, one chunk: the fused op keeps them whole and
# saves little); at the `gpu` profile's, which are the `trn2` profile's, 65,536 × 8,192 (2 GiB, 32 chunks):

# %%
from frontier.study.bench_head import format_head_bench, run_head_bench

shapes = [ch.profile.name] if ch.profile.dry_run else ["cpu", "gpu"]
head = run_head_bench(shapes, steps=1, repeats=3, out=ch.root / ch.profile.name / "bench", log=ch.log)
print(format_head_bench(head))

# %%
from frontier.figures import new_figure

cases = head["cases"]
labels = [f"{c['profile']} shapes\n{c['positions']:,} x {c['vocab']:,}\nbias {'on' if c['bias'] else 'off'}" for c in cases]
fig, axes = new_figure(10.0, 3.8, ncols=2)
xs = range(len(cases))
for off, variant, style, colour, name in ((-0.1, "plain", "o", "C0", "plain PyTorch (whole logits)"),
                                          (0.1, "fused", "s", "C1", "fused op (chunks)")):
    at_x = [i + off for i in xs]
    axes[0].plot(at_x, [c["memory"][variant]["extra_peak_mib"] for c in cases], style, color=colour, label=name)
    med = [c["ms_median"][variant] for c in cases]
    axes[1].errorbar(at_x, med, fmt=style, color=colour, capsize=3, label=name,
                     yerr=[[m - min(c["ms"][variant]) for m, c in zip(med, cases)],
                           [max(c["ms"][variant]) - m for m, c in zip(med, cases)]])
for ax, label in ((axes[0], "extra peak MiB\n(a fresh process each)"),
                  (axes[1], f"ms per forward + backward\n(median; bar: range of {len(cases[0]['ms']['plain'])} rounds)")):
    ax.set_xticks(list(xs), labels, fontsize=7)
    ax.set_xlim(-0.5, len(cases) - 0.5)
    ax.set_ylabel(label)
    ax.set_yscale("log")
    ax.grid(alpha=0.3, axis="y")
axes[0].legend(fontsize=8)
axes[0].set_title("peak memory (log axis: points)", fontsize=10)
axes[1].set_title(f"time on this CPU (log axis: points)", fontsize=10)
ch.figure(fig, "03_head_bench")  # figures/03_head_bench_PROFILE.png

# %%
for c in head["cases"]:
    m = c["memory"]
    print(f"{c['profile']} shapes, bias {'on' if c['bias'] else 'off'}: {c['logits_mib']:,.0f} MiB of logits in "
          f"{-(-c['positions'] // c['chunk_rows'])} chunk(s); plain adds {m['plain']['extra_peak_mib']:,.0f} MiB at its "
          f"peak, fused {m['fused']['extra_peak_mib']:,.0f} ({c['memory_ratio']:.1f}x); fused takes "
          f"{c['time_ratio']:.2f}x plain's time")

# %% [markdown]
# Where the logits fit one chunk the two ways do the same work; their extra memory and time there are of one order,
# and which is ahead moves from one execution to the next (the bench's earlier records beside this one,
# `runs/cpu/bench/bench-head-*.json`, show either ahead on both). Where they do not,
# plain PyTorch holds several copies of the 2 GiB logits at its peak and the fused op a few 64 MiB chunks: an order
# of magnitude less memory, on any device. The time on this CPU is the price of recomputing each chunk in the
# backward against the cost of writing and reading the whole logits; on a NeuronCore those bytes are what the step
# waits on (the head's rows in the previous section).

# %% [markdown]
# ## Silent fallbacks, made visible
#
# One of the write-up's lessons about kernels was not about speed: a layer that quietly takes a slow path when the
# fast one cannot run produces numbers that look like findings. `frontier.kernels` never falls back. It says per op
# which implementations can run on this machine (`frontier kernels`):

# %%
from IPython.display import Markdown, display

from frontier.kernels import status
from frontier.study import report

table = {}
for r in status():
    table.setdefault(r["op"], {"op": r["op"]})[r["impl"]] = "runs here" if r["runs_here"] else "cannot run here"
display(Markdown(report.markdown_table(list(table.values()), ["op", "reference", "interpreter", "nki"])))
print("nki, why not:", next(r["why_not"] for r in status() if r["impl"] == "nki"))

# %% [markdown]
# and a run that asks for the NKI kernels on a device without them (here the CPU, named, so that a Neuron host
# shows the same refusal) stops before anything is written, in one line
# (`frontier.kernels.check` runs before training, and for the kernel implementations calls every op once at the
# run's shapes, forward and backward, so a kernel that refuses a shape fails there and not mid-run):

# %%
import contextlib
import io
import tempfile
from pathlib import Path

from frontier.cli import main as frontier_cli

with tempfile.TemporaryDirectory() as tmp:
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = frontier_cli(["train", "--recipe", "baseline", "--profile", ch.profile.name, "--kernels", "nki",
                             "--device", "cpu", "--nproc", "1", "--steps", "1", "--out", str(Path(tmp) / "run")])
    print(f"exit status {code}: {err.getvalue().strip()}")
    print(f"run folder written: {(Path(tmp) / 'run').exists()}")

# %% [markdown]
# What a fallback would have looked like: suppose the layer had caught that error and run something else instead.
# The stand-in here is the interpreter, which runs the same kernels instruction by instruction in NumPy.
# `frontier bench baseline baseline@interpreter --device cpu` times the two side by side; a reader told the second
# row was "the NKI model" would conclude the kernels make training many times slower. The record says what ran: each
# row's `kernel_calls` are counted as the ops execute, not copied from the configuration. The bench names the CPU
# device: on a Neuron host `auto` picks the NeuronCore, whose bf16 autocast the fp32 interpreter refuses, so there
# too the comparison is the one a host can run, reference and interpreter side by side on its CPU.

# %%
from frontier.study import experiments as ex
from frontier.study.bench import format_bench

fallback = ex.bench(["baseline", "baseline@interpreter"], ch.profile, root=ch.root, data=str(ch.data.folder),
                    device="cpu", steps=1 if ch.profile.dry_run else 2, repeats=2, memory=False, log=ch.log)
print(format_bench(fallback))
for r in fallback["rows"]:
    ran = {i for impls in r["kernel_calls"].values() for i in impls}
    print(f"{r['recipe']}: ran {sorted(ran)} "
          f"({sum(n for impls in r['kernel_calls'].values() for n in impls.values())} op calls in the timed steps)")

# %%
from frontier.figures import new_figure

ref, interp = fallback["rows"]
slow = ref["tokens_per_s_median"] / interp["tokens_per_s_median"]
fig, ax = new_figure(6.4, 3.4)
ax.bar(["baseline\n(reference)", "baseline@interpreter\n('NKI', silently not)"],
       [r["tokens_per_s_median"] for r in (ref, interp)], color=["C0", "C3"], alpha=0.6)
for i, r in enumerate((ref, interp)):
    ax.scatter([i] * len(r["samples"]), r["samples"], color="k", s=12, zorder=3)
ax.set_ylim(bottom=0)
ax.set_ylabel("tokens / s (axis from zero;\nbar: median, dots: each round)")
ax.set_title(f"a silent fallback reads as 'this is {slow:.1f}x slower'\n({ch.profile.name} profile, this CPU)"
             if slow > 1 else f"{ch.profile.name} shapes: the interpreter is not slower here ({slow:.2f}x)",
             fontsize=10)
ch.figure(fig, "03_fallback")  # figures/03_fallback_PROFILE.png

# %% [markdown]
# ## What it takes on Trainium
#
# The kernels target one toolchain, named in `frontier/kernels/toolchain.py` and nowhere else; another NKI release
# is refused in one line rather than trusted. On a Trn2 instance (docs/trainium.md has the details):
#
# 1. The Neuron Deep Learning AMI's PyTorch environment, or `pip install torch-neuronx neuronx-cc` from the Neuron
#    pip index (PyPI holds only empty stubs of those names); then `pip install -e .` in this checkout.
# 2. `frontier prepare --out data/climbmix --text <export.jsonl> --vocab-size 8192`: the competition's vocabulary.
# 3. `frontier kernels --device neuron` must show `nki` as runnable for every op.
# 4. Warm the compile cache outside the clock (`neuron_parallel_compile`, or one untimed run).
# 5. `frontier train --recipe best --profile trn2 --data data/climbmix --device neuron`: four data-parallel
#    processes, one per logical NeuronCore (LNC=2), every fused op as its NKI kernel (`--kernels nki`, the default on
#    a Neuron device).
#
# What can be checked here besides the numbers: every kernel call of a trn2 step, traced at one worker's shapes as
# Trn2 launches it, emits instructions within the project's budget (the compiler's limit is undocumented), fits SBUF
# and PSUM, and passes the check of NKI 0.7's language rules (`frontier kernels` prints this list):

# %%
from frontier.kernels.interpreter import find_real_nki
from frontier.kernels.toolchain import NAME
from frontier.kernels.verify import format_inventory, inventory
from frontier.profiles import get_profile
from frontier.recipes import resolve

at = get_profile(ch.profile.name if ch.profile.dry_run else "trn2")
print(f"toolchain: {NAME}; here: {find_real_nki()[1] or 'the real nki is installed'}")
inv = inventory(resolve("baseline", at), at.batch_size // at.nproc)
print(format_inventory(inv))
print(f"largest: {max(r['instructions'] for r in inv['kernels']):,} instructions; every call within the budget: "
      f"{all(r['within_limit'] for r in inv['kernels'])}; every kernel passes the language check: "
      f"{all(r['language_ok'] for r in inv['kernels'])}")

# %% [markdown]
# What stays unverified without a Trn2, so that nobody mistakes the interpreter for the hardware:
#
# - that `neuronx-cc` compiles the kernels and how many instructions it accepts (the language check follows the
#   documentation, not the compiler); the kernels have never run on a NeuronCore;
# - that torch-neuronx's `nki_op` takes these signatures, and that the neuron backend lowers each registered op of
#   the compiled graph to its kernel (a stand-in toolchain checks the graphs; `tests/test_neuron_trace.py`);
# - ScalarE's real accuracy, how DMA rounds a cast to bf16, where PSUM tiles land, how `core_barrier` orders HBM
#   writes at LNC=2;
# - every time in this chapter's second section: the roofline is a model, its engine overlap the best case.

# %% [markdown]
# ## What this chapter found

# %%
import numpy as np
import torch

from frontier.kernels import interpreted, ops
from frontier.kernels.interpreter import run
from frontier.kernels.toolchain import LNC
from frontier.study.bench_records import load_bench_record
from frontier.study.chapter import machine
from frontier.study.roofline import roofline_record

rms = interpreted.kernels("rmsnorm")
x = torch.randn(300, ch.profile.n_embd, generator=torch.Generator().manual_seed(0))
y, counts = run(rms.rmsnorm_fwd[LNC], x.numpy(), eps=torch.finfo(x.dtype).eps)
rms_diff = float(np.abs(y - ops.rmsnorm(x, "reference").numpy()).max())

at = ch.profile.name if ch.profile.dry_run else "trn2"
roof = roofline_record(at, ch.root / at / "bench", log=ch.log)
pred = roof["predictions"][roof["kernel_matmul_peak"]]

bench = ch.root / ch.profile.name / "bench"
heads = sorted(bench.glob("bench-head-*.json"))
head = load_bench_record(heads[-1]) if heads else None
big = max(head["cases"], key=lambda c: c["positions"]) if head else None

ref_ms, ker_ms = (pred["chip_step_s"][k] * 1e3 for k in ("reference", "kernel"))
shape = f"{roof['shapes']['n_layer']} x {roof['shapes']['n_embd']}"
print(f"RMSNorm kernel at LNC={LNC} against the reference: {rms_diff:.1e}, {counts.lnc_conflicts} conflicts")
print(f"predicted {shape} step on one chip: {ref_ms:.4g} -> {ker_ms:.4g} ms ({pred['speedup']:.2f}x, matmuls at "
      f"{roof['kernel_matmul_peak']})")
if big:
    print(f"head at {big['positions']:,} x {big['vocab']:,} logits: plain adds {big['memory_ratio']:.1f}x the fused "
          f"op's extra memory; the fused op takes {big['time_ratio']:.2f}x plain's time (bias {'on' if big['bias'] else 'off'})")
box.update(
    f"**Not measurable here; predicted {pred['speedup']:.2f}x.** No NeuronCore ({machine()}): no tokens/s, no bpb; "
    f"the kernels compute what the reference computes. In the interpreter at LNC=2 the RMSNorm kernel matches the "
    f"reference within {rms_diff:.0e}. A cost model of counted bytes and FLOPs (not a measurement) puts the {at} step "
    f"({shape}) on one Trn2 chip at {ref_ms:.3g} ms with the reference ops, {ker_ms:.3g} ms with the kernels."
    + (f" Measured here: at {big['positions']:,} x {big['vocab']:,} logits plain PyTorch adds "
       f"{big['memory_ratio']:.1f}x the fused head's extra memory; the fused head takes {big['time_ratio']:.2f}x its "
       f"time." if big else ""))

# %% [markdown]
# ## Records
#
# The bench records this chapter quoted, the code that wrote each, and what the chapter's experiments said.

# %% jupyter={"outputs_hidden": true}
from frontier.study.bench_records import load_bench_record
from frontier.study.roofline import roofline_record

at = ch.profile.name if ch.profile.dry_run else "trn2"
bench = ch.root / ch.profile.name / "bench"
benches = [roofline_record(at, ch.root / at / "bench", log=ch.log)]
benches += [load_bench_record(p) for pattern in ("bench-head-*.json", "bench-baseline+baseline@interpreter-*.json")
            for p in sorted(bench.glob(pattern))[-1:]]
ch.records([], benches)
