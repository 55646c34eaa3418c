# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: tags,-all
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
# # Chapter 2: torch.compile
#
# The write-up's first big gain was not a new idea about language models: it was getting `torch.compile` to work
# on Neuron. The competition baseline ran eagerly, one operator at a time. Compiling the model turns the Python
# forward pass into a graph (TorchDynamo), differentiates it ahead of time (AOTAutograd) and hands it to a backend
# that fuses operators and generates code: Inductor emits C++/OpenMP on a CPU and Triton on a GPU; on native
# Neuron the `neuron` backend lowers the graph through `neuronx-cc` to a NEFF for the NeuronCores.
#
# Compilation has a price paid up front, and under a 30-minute clock the question is when it pays back. The
# competition did not charge the first few steps (up to a 900 s start-up allowance), so there the compile is
# free; a laptop's clock charges everything. This chapter measures both on the machine that runs it.

# %% tags=["parameters"]
profile = "cpu"
run_root = "../runs"
figures_dir = "../figures"

# %%
from pathlib import Path

from IPython.display import Markdown, display

from frontier.figures import loss_curve_figure, new_figure, save_figure
from frontier.profiles import get_profile
from frontier.study import experiments as ex
from frontier.study import report
from frontier.study.bench import format_bench
from frontier.study.compare import compare, format_comparison

P = get_profile(profile)
figures = Path(figures_dir)
print(f"profile {P.name}: {P.summary}")
print(ex.code_banner())

# %% [markdown]
# ## Step time, eager against compiled
#
# `frontier bench` builds both recipes once, warms each up (the first compiled step is where compilation
# happens; `cold=True` turns off Inductor's on-disk caches so that it is timed from scratch), then times them in
# alternation, A B A B ..., so that anything else the machine does affects both alike. The ratio is the compiled
# median over the eager median. The bench writes its record (hardware, code version, every round) under
# `runs/PROFILE/bench/`, and the numbers below are read back from that file.

# %%
bench = ex.bench(["baseline", "compile"], P, root=run_root, steps=10 if P.name != "smoke" else 3,
                 repeats=5 if P.name != "smoke" else 2, cold=True, memory=P.name != "smoke")
print(format_bench(bench))
print(f"bench record: {bench['path']} (code {report.short_code(bench['code'])})")

# %%
eager_row, comp_row = bench["rows"]
speedup = comp_row["tokens_per_s_median"] / eager_row["tokens_per_s_median"]
fig, ax = new_figure(6.4, 3.2)
for i, row in enumerate(bench["rows"]):
    ax.bar([i], [row["tokens_per_s_median"]], width=0.5, color=f"C{i}", alpha=0.35)
    ax.scatter([i] * len(row["samples"]), row["samples"], color=f"C{i}", s=16, zorder=3)
ax.set_xticks([0, 1], ["eager (baseline)", "compiled"])
ax.set_ylabel("tokens / s (bar: median,\ndots: each round)")
ax.set_title(f"{P.name} profile, {bench['device']['backend']}: compiled / eager = {speedup:.2f}x "
             f"(axis from zero)", fontsize=10)
save_figure(fig, figures / f"02_bench_{P.name}.png")
fig

# %% [markdown]
# ## What the compile costs, and when it pays back
#
# The first compiled step includes tracing and code generation. Counting the compile as the time of that step
# minus one ordinary step, and the saving per step as the difference of the median step times, the compile pays
# for itself after `compile / saving` steps. Under the competition's rules it is free (inside the uncharged
# warm-up), so it pays from the first charged second; on a laptop's clock it pays only after the break-even.

# %%
compile_s = comp_row["first_step_s"] - comp_row["step_ms_median"] / 1000
saving_s = (eager_row["step_ms_median"] - comp_row["step_ms_median"]) / 1000
if saving_s > 0:
    break_even_steps = compile_s / saving_s
    break_even_s = break_even_steps * eager_row["step_ms_median"] / 1000
    verdict = (f"pays back after {break_even_steps:,.0f} steps, i.e. {break_even_s:,.0f} s of eager training "
               f"(the {P.name} budget is {P.budget_s:g} s)")
else:
    break_even_steps = break_even_s = float("inf")
    verdict = "never pays back on this machine: compiled steps are not faster"
print(f"compile ~ {compile_s:.1f} s; saving {1000 * saving_s:.1f} ms per step; {verdict}")
print(f"dynamo: {comp_row['compile']}")

# %% [markdown]
# ## Equal budget, eager against compiled
#
# The real test is the score after the same charged budget. The eager runs are the `baseline` records this
# checkout reuses: per seed, the newest one the current code reproduces (the table below names each run folder and
# the code that trained it). They have chapter 1's config and data, but they need not be chapter 1's runs: chapter 1
# loads a trained model, which needs a checkpoint, and checkpoints are not committed, so it trained a run of its
# own. In the execution committed here this chapter reads `baseline/s0-3`, `s1-2` and `s2-2` (the ladder's runs,
# code 1f925ceb, 231 steps and 1.9790 at seed 0), trained in the same session and by the same code as the compiled
# runs; chapter 1's seed 0 is `baseline/s0-4` (code a51eec47, trained later: 358 steps, 1.8447). Against that run the
# compiled runs would score worse instead of better: two sessions of this machine differ by more than the compile
# gains (chapter 5 measures that drift), which is why a comparison reads runs of one session. Each record keeps both
# clocks: `charged_s` (the competition's) and `wall_s` (everything, the laptop's). Every compiled run resets
# TorchDynamo first (`frontier.train.compile.fresh_compile`), so it compiles for itself and its record's compile counts
# and first step are its own (Inductor's on-disk cache may still make that compile quick: the record counts its
# hits). Records written before that reset reused a compile made earlier in their process; their compile fields
# show `-` (`frontier.records.upgrade`).

# %%
eager = ex.seeds("baseline", P, root=run_root)
compiled = ex.seeds("compile", P, root=run_root)
display(Markdown(report.runs_table(eager + compiled)))
groups, diffs = compare(eager + compiled)
print(format_comparison(groups, diffs))
codes = {name: sorted({report.short_code(r.get("code")) for r in rs}) for name, rs in (("eager", eager),
                                                                                     ("compiled", compiled))}
print(f"trained by code: eager {', '.join(codes['eager'])}; compiled {', '.join(codes['compiled'])}"
      + ("" if codes["eager"] == codes["compiled"] else
         " (different code versions, so different sessions: the difference carries the machine's drift too)"))

# %%
fig, ax = new_figure(6.4, 3.8)
loss_curve_figure(eager, smooth=5, ax=ax)
loss_curve_figure(compiled, smooth=5, ax=ax)
ax.set_title(f"{P.name}: eager and compiled, training loss against charged time")
save_figure(fig, figures / f"02_loss_{P.name}.png")
fig

# %%
rows = [{"recipe": r["recipe"], "seed": r["seed"], "steps": r["steps"], "charged_s": r["charged_s"],
         "uncharged_s": r["uncharged_s"], "wall_s": r["wall_s"], "first_step_s": r["first_step_s"],
         "recompiles": (r["compile"] or {}).get("recompiles_after_warmup")} for r in eager + compiled]
display(Markdown(report.markdown_table(rows, ["recipe", "seed", "steps", "charged_s", "uncharged_s", "wall_s",
                                              "first_step_s", "recompiles"],
                                       {"charged_s": ".1f", "uncharged_s": ".1f", "wall_s": ".1f", "first_step_s": ".2f"})))

# %% [markdown]
# ## And the optimiser step?
#
# Muon orthogonalises every block matrix with five Newton-Schulz iterations each step (`frontier/optim/muon.py`);
# matrices of the same shape go through as one batch. Recipe `compile-opt` compiles that batched step too (one
# graph per shape, built on the first step). Does it pay? The same side-by-side bench, cold compile again:

# %%
opt_bench = ex.bench(["compile", "compile-opt"], P, root=run_root, steps=10 if P.name != "smoke" else 3,
                     repeats=5 if P.name != "smoke" else 2, cold=True, memory=P.name != "smoke")
print(format_bench(opt_bench))
print(f"bench record: {opt_bench['path']}")
plain, opt_row = opt_bench["rows"]
opt_ratio = opt_row["tokens_per_s_median"] / plain["tokens_per_s_median"]
opt_clear = opt_row["tokens_per_s_min"] > plain["tokens_per_s_max"]
opt_verdict = (f"{opt_ratio:.2f}x tokens/s, first step {opt_row['first_step_s']:.1f} s against "
               f"{plain['first_step_s']:.1f} s; "
               + ("every round faster" if opt_clear else "the rounds overlap: inside the spread of this bench"))
print(opt_verdict)

# %% [markdown]
# On an H200 (`runs/gpu-h200/check-2026-11-30/bench-compile-opt.log`, `gpu` profile) the same comparison gave
# 1.00x. So later recipes do not compile the optimiser step: a longer compile for no clear gain. The option stays
# (`TrainConfig.compile_optimizer`) for hardware where the Newton-Schulz step is a larger share of the step.

# %% [markdown]
# ## On Trainium
#
# What it took there, from the write-up and the Neuron documentation (none of it can run on this machine):
#
# - **The native backend.** TorchNeuron (torch-neuronx 2.13+, device `neuron`) supports
#   `torch.compile(backend="neuron")` with `fullgraph=True` and without `dynamic=True`; `frontier` selects it
#   when the installed packages offer it (`frontier/devices.py`). The older XLA path (torch-neuronx ≤ 2.9) has no
#   `torch.compile` at all: it traces lazily and needs `torch_xla.sync()` every step.
# - **Compile ahead of the clock.** A `neuronx-cc` compile of a full training step takes minutes.
#   `neuron_parallel_compile` runs the script once to collect and compile every graph in parallel, and the
#   results land in the compile cache (`/var/tmp/neuron-compile-cache`), so the timed run starts warm.
# - **Recompiles are deadly.** Any shape or guard that changes after warm-up (a different last batch, a Python
#   scalar passed into the graph, an evaluation shape) triggers another multi-minute compile inside the charged
#   30 minutes. `frontier` counts dynamo's compiled frames after warm-up in every record, warns on the first
#   recompilation and stops the run under `--strict`; the sparse bigram update of chapter 4 keeps its shapes fixed
#   for the same reason.

# %% [markdown]
# ## More than one process: data parallelism
#
# A compiled step keeps one accelerator busy; a Trn2 chip is four. `frontier train ... --nproc N` starts
# `torchrun` itself (`python -m torch.distributed.run --standalone --nproc-per-node N -m frontier train ...`), and
# `torchrun --nproc-per-node N -m frontier train ...` typed by hand does the same (`frontier/train/distributed.py`).
# Each process (rank) builds the same model from the same seed, draws the batch one process would draw and takes
# its `batch_size / N` rows of it: the profile's batch stays the global batch, so N processes train what one
# process trains, only with the sums in another order (the config and its hash do not change; the record keeps
# `world_size`, and `tests/test_distributed.py` checks every recipe on 2 ranks against 1 process). Each step:
#
# - **Gradients** are averaged by DistributedDataParallel's bucketed all-reduce, each bucket sent while backward
#   is still filling the next; under `torch.compile`, DDP cuts the compiled graph at its buckets so that the first
#   buckets can leave early. A rank's loss is the mean over its rows, so the average over ranks is the gradient of
#   the global mean.
# - **Muon**: each rank orthogonalises its share of the matrices (1/N of the Newton-Schulz work) and an all-gather
#   assembles the updates; the momentum buffers are the same on every rank.
# - **The sparse bigram update** stays sparse: only the row ids and gradient rows of the batch's positions are
#   all-gathered, never the table. **Streaming n-gram counting** all-gathers the batch's tokens, so every rank's
#   tables count the whole batch; counting the shards, every rank counts all of them.
# - **The clock** is rank 0's: its step seconds are broadcast and charged on every rank, so the learning-rate
#   schedule and the decision to stop are the same everywhere. Rank 0 writes the record and the checkpoints;
#   Ctrl-C stops every rank at the same step with a checkpoint that `--resume` continues, and a rank that dies
#   ends the job with one line naming it.
#
# `frontier bench baseline --nproc 1,2` puts 1 process and 2 side by side in one record. On this machine the two
# ranks share its 2 cores (one thread each) with nothing gained in total compute, so the chapter does not quote
# that ratio.
#
# **On a Trn2 chip** (not run here): its 8 NeuronCores show as 4 logical NeuronCores, 2 physical cores each, and a
# NeuronCore serves one process, so data parallelism there means 4 workers, one per logical core: the `trn2`
# profile launches 4 by default, 8 of the batch's 32 rows each (`--nproc 1` trains on one logical core). The
# process group's backend is the one the installed torch-neuronx registers with torch.distributed (`neuron` for
# native TorchNeuron, `xla` for the XLA path), refused with one line when it offers none. Every worker compiles
# the same graphs, so the compile cache should be warm before the clock starts (`neuron_parallel_compile`), and
# the process group's timeout (`--dist-timeout`, 120 s by default) must outlast the longest wait of one rank for
# another, a compile included.

# %% [markdown]
# ## What this chapter measured

# %%
g_eager, g_comp = groups
d = diffs[0]
hw = compiled[0]["hardware"]
display(Markdown(
    f"- Step time on {hw['cpu']} ({hw['cpu_cores']} cores, {bench['device']['backend']}): compiled / eager = "
    f"**{speedup:.2f}x** tokens/s (median of {bench['repeats']} alternating rounds).\n"
    f"- Compile ~ {compile_s:.1f} s; it {verdict}.\n"
    f"- Compiling Muon's Newton-Schulz step as well (`compile-opt`): {opt_verdict}.\n"
    f"- val_bpb at {P.budget_s:g} charged seconds: eager {report.pm(g_eager.values)}, compiled "
    f"{report.pm(g_comp.values)}; difference {d.delta:+.4f} ({d.verdict}"
    + (f", Welch p = {d.p:.3g}" if d.p == d.p else "") + ").\n"
    f"- Later recipes inherit compilation.\n"
    f"- Code behind these numbers: the benches ran code {report.short_code(bench['code'])}; the runs:\n"
    + report.provenance(eager + compiled)
))
