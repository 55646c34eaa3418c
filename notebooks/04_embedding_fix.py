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
# # Chapter 4: the hashed bigram embedding, and the fix for its slow update
#
# Two changes meet here, and the project's rule (`frontier.study.compare.RULE`) judges them differently. The
# **bigram table** changes what the model computes: a **learning change**, judged by val_bpb paired by seed. Its
# **sparse update** (only the rows a step touched) changes how fast the same table trains: a **speed change**,
# judged by a bench that times both updates side by side at the profile's table size, and measured in short runs
# at the write-up's size. The box below is computed from this execution's records when the chapter runs.

# %% tags=["parameters"]
profile = "cpu"
run_root = "../runs"
figures_dir = "../figures"

# %%
import inspect
from pathlib import Path

from IPython.display import Markdown, display

from frontier.data.dataset import profile_dataset
from frontier.data.loader import TrainLoader
from frontier.figures import new_figure, save_figure
from frontier.model.bigram import BigramEmbedding, bigram_rows
from frontier.optim import bigram_update
from frontier.profiles import get_profile
from frontier.recipes import resolve
from frontier.study.bench_records import load_bench_record
from frontier.study import experiments as ex
from frontier.study import ladder, report
from frontier.study.bench import format_bench
from frontier.study.bench_table import format_table_bench, sparseadam_fit, touched_rows, travel_after_one_touch
from frontier.study.compare import RULE, compare, format_comparison, judge_speed
from frontier.study.ablation import EQUAL_STEPS
from frontier.study.sweep import format_sweep, newest_sweep
from frontier.train.trainer import build_model

P = get_profile(profile)
figures = Path(figures_dir)
log_lines = []  # what the experiments say about reusing or training each run: printed in the appendix
log = log_lines.append
print(ex.code_banner())

# %%
# Everything the box quotes, read or measured once here.
data = profile_dataset(P, log=log)
cfg = resolve("bigram", P)
dim, rows_here = cfg.model.n_embd, cfg.model.bigram.rows
rows_list = [1 << 16, 1 << 18, 1 << 19] if P.name != "smoke" else [1 << 10, 1 << 12, 1 << 14]
rows_big = rows_list[-1]  # the write-up's 2^19 at the cpu profile (the smoke profile only checks that this runs)
x, _ = TrainLoader(data.train_tokens(), P.seq_len, P.batch_size, seed=0).next_batch()

# The learning change: the profile's seeds with and without the table, at the profile's reference budget.
without = ex.seeds("compile", P, root=run_root, log=log)
with_table = ex.seeds("bigram", P, root=run_root, log=log)
groups, diffs = compare(without + with_table, paired=True)
d = diffs[0]
table_gain = (-d.delta, d.p, d.pairs)  # positive: the table lowers val_bpb
# The rule's first stage: the final recipe without its table at equal steps (`frontier ablate --steps N`; none at
# the smoke profile, whose verdict then says equal steps were not measured).
# (`newest_sweep` matches a name's prefix, and `ablation-ema-420-stdlib-source` starts with `ablation-ema-420`:
# the record's own name picks the embedded corpus's sweep.)
steps_name = f"ablation-ema-{EQUAL_STEPS.get(P.name)}"
at_steps_sweep = max((sw for sw in map(load_bench_record, (Path(run_root) / P.name / "sweeps").glob(
    f"sweep-{steps_name}-*.json")) if sw["name"] == steps_name), key=lambda sw: sw["created"], default=None)
no_table_steps = next((r for r in at_steps_sweep["rows"] if r.get("recipe") == "ema-no-bigram"),
                      None) if at_steps_sweep else None
at_steps = ({"gain": -no_table_steps["gain"], "p": no_table_steps["p"], "seeds": len(at_steps_sweep["seeds"])}
            if no_table_steps else None)  # the sweep's gain is base - variant: negative where the table helps
_, table_verdict = ladder.rule_verdict(at_steps, table_gain)
record = ladder.latest_ladder_record(P.name, root=run_root)
rung = next((r for r in ladder.judged_rows(record["rows"]) if r.get("recipe") == "bigram" and "verdict" in r),
            None) if record else None
ablation = newest_sweep(run_root, P.name, "ablation-final-budget")
no_table = next((r for r in ablation["rows"] if r.get("recipe") == "ngram-no-bigram"), None) if ablation else None

# The speed change: the table's own share of a step (interleaved, three sizes), the whole step side by side at the
# profile's size (`frontier bench`, which builds the profile's table), and the whole step at the largest size in
# two step-limited runs (one seed each; the bench cannot change the table's size).
ROUNDS = 5 if P.name != "smoke" else 2
table = ex.table_bench(rows_list, dim, x, P, root=run_root, steps=5 if P.name != "smoke" else 2, repeats=ROUNDS)
curve = {c["rows"]: c for c in table["curve"]}
bench = ex.bench(["compile", "bigram", "bigram-dense"], P, root=run_root, steps=10 if P.name != "smoke" else 3,
                 repeats=ROUNDS, memory=P.name != "smoke", log=log)
speed = judge_speed(bench, "bigram-dense", "bigram")
BIG_STEPS = 30 if P.name != "smoke" else 4
big = {u: ex.run(u, P, seed=0, root=run_root, steps=BIG_STEPS, sizes=dict(bigram_rows=rows_big),
                 label=f"{u}-rows{rows_big}-{BIG_STEPS}steps", log=log) for u in ("bigram", "bigram-dense")}
big_ms = {u: 1000 * r["step_s_median"] for u, r in big.items()}
bench_ms = {r["recipe"]: r["step_ms_median"] for r in bench["rows"]}


def rows_name(n):
    return f"2^{n.bit_length() - 1}" if n == 1 << (n.bit_length() - 1) else f"{n:,}"


here_c, big_c = curve[rows_here] if rows_here in curve else None, curve[rows_big]
display(Markdown(report.finding_box(
    "the hashed bigram embedding and its sparse (touched-rows) update",
    "the final model reads a table of 2^19 rows; fixing the table's update, which was \"mostly padding\" (a dense "
    "gradient and optimiser step over every row when a step touches only batch x sequence of them), was one of its "
    "biggest gains; no separate bpb or speed figure for this step is quoted here",
    f"val_bpb in {P.budget_s:g} reference seconds without the table {report.bpb_group(without)}, with it "
    f"{report.bpb_group(with_table)} (gain {table_gain[0]:+.4f}, paired by seed). The sparse update, whole step: at "
    f"{rows_name(rows_here)} rows sparse / dense = **{speed.ratio:.2f}x** tokens/s ({len(speed.round_ratios)} "
    f"interleaved rounds, each {min(speed.round_ratios):.2f}-{max(speed.round_ratios):.2f}x); at "
    f"{rows_name(rows_big)} rows the dense step takes **{big_ms['bigram-dense'] / big_ms['bigram']:.2f}x** the "
    f"sparse one ({big_ms['bigram-dense']:,.0f} against {big_ms['bigram']:,.0f} ms, median of one "
    f"{BIG_STEPS}-step run each, not interleaved); the table's own share there is {big_c['dense_ms']:,.0f} against "
    f"{big_c['sparse_ms']:.1f} ms a step",
    f"the table, a learning change: {table_verdict}"
    + (f" (equal steps: the final recipe without its table, {at_steps_sweep['steps']} steps, "
       f"{len(at_steps_sweep['seeds'])} seeds, {ladder.repo_path(at_steps_sweep['path'])}; equal budget: `bigram` "
       f"over `compile` above)" if at_steps else "")
    + (f"; taken out of `ngram` (the budget-stage ablation's base) at the same budget: the recipe scores "
       f"{-no_table['gain']:+.4f} better with it, p = {no_table['p']:.3f} ({ladder.repo_path(ablation['path'])})"
       if no_table else "")
    + f". The sparse update, a speed change: at {rows_name(rows_here)} rows {speed.short}; at "
      f"{rows_name(rows_big)} rows not judged by the bench (no interleaved whole-step bench at that size), "
      f"measured {big_ms['bigram-dense'] / big_ms['bigram']:.2f}x in single runs",
)))

# %% [markdown]
# ## The table
#
# A token embedding knows one token. Many next-token predictions depend on the last two: after "import" comes a
# module name, after "self" a dot. The hashed bigram embedding is a table where position $t$ reads row
# $(36313\,x_t \oplus 27191\,x_{t-1}) \bmod (\text{rows}-1)$ (the first position of a sequence reads a reserved
# row), multiplies it by a fixed random sign per bigram (so colliding bigrams tend to cancel rather than add) and a
# learned scale, and adds it to the token embedding. The table starts at zero, so at step 0 the model is exactly
# the recipe below it (`compile`, chapter 2). The lookup, from the package:

# %%
display(Markdown(report.source_of(bigram_rows, BigramEmbedding.forward)))
print(f"{P.name} profile: a table of {rows_here:,} rows x {dim} = {rows_here * dim:,} weights; the rest of the "
      f"model has {build_model(resolve('compile', P)).num_params():,}")

# %% [markdown]
# ## Why the naive update is mostly padding
#
# Written the obvious way, the table is one more `nn.Parameter`: the backward pass of the lookup writes a gradient
# for **every** row (zeros almost everywhere), and AdamW reads and writes every row's weight and two moments,
# every step. A step only reads batch × sequence positions. The distinct rows a real batch touches:

# %%
touch = [{"table_rows": r, "positions": x.numel(), "touched_rows": touched_rows(x, r),
          "touched_share": touched_rows(x, r) / r} for r in sorted(set(rows_list + [rows_here]))]
display(Markdown(report.markdown_table(touch, {"table_rows": "table rows", "positions": "positions in a batch",
                                               "touched_rows": "distinct rows touched", "touched_share": "share of the table"},
                                       {"touched_share": ".3%"})))

# %% [markdown]
# ## The fix: Adam on the touched rows only
#
# `frontier/model/bigram.py` keeps the dense path as the reference (`update="dense"`, recipe `bigram-dense`) and the
# sparse one is the recipe `bigram` (`update="sparse"`). The forward pass gathers the touched rows without asking
# autograd for the table's gradient and adds a zero "sink" of the batch's shape; after `backward()` the sink's
# gradient is each position's row gradient. Then the optimiser (`frontier/optim/bigram_update.py`):

# %%
step_lines = inspect.getsource(bigram_update.SparseRowAdam.step).splitlines()
first = next(i for i, t in enumerate(step_lines, 1) if "rows = self.emb.rows(" in t)  # counted from 1
last = next(i for i, t in enumerate(step_lines, 1) if "self.count.index_copy_" in t)
display(Markdown(report.source_of(bigram_update.SparseRowAdam.step, lines=(first, last))))
display(Markdown(report.source_of(bigram_update.sum_by_row)))

# %% [markdown]
# `sum_by_row` sums the gradients per row into a fixed number of slots (batch × sequence; unused slots point at a
# scratch row with a zero gradient), by sorting the row ids: no shape ever depends on how many rows were unique.
# Then Adam runs on those slots only, with per-row moments and a per-row step count `c`, and writes them back with
# `index_copy_`.
#
# **How it differs from dense AdamW.** Untouched rows do not change at all (dense AdamW keeps moving a row with its
# decaying momentum for many steps after it was last used), and the bias correction uses each row's own number of
# updates rather than the global step. From a fresh state, when every step touches the same rows, the two are
# identical; the tests check that, and that untouched rows never change.
#
# **On Neuron/XLA** a shape that changes every step recompiles every step. `torch.unique` returns as many rows as are
# unique, a different number each batch; `sum_by_row` pads that count to its upper bound so the update has one
# shape forever, and nothing waits on the host for the count.

# %% [markdown]
# ## The update alone: time against table size
#
# The table's whole share of a step (the gather, the backward into the table, the optimiser) at three sizes, timed
# in alternation (`frontier bench-table`, kept as a bench record under `runs/PROFILE/bench/` and read back): dense
# AdamW, the sparse row-wise Adam, and PyTorch's own `torch.optim.SparseAdam` (the table read with a sparse
# gradient). A random gradient stands in for the rest of the network.

# %%
print(format_table_bench(table))

# %%
fig, ax = new_figure(6.4, 3.9)
for kind, style, label in (("dense", "o-", "dense AdamW (naive)"), ("sparse", "o-", "sparse row-wise Adam (fix)"),
                           ("torch-sparseadam", "s--", "torch.optim.SparseAdam")):
    pts = table["curve"]
    best = [c[kind.replace("-", "_") + "_ms"] for c in pts]
    ax.errorbar([c["rows"] for c in pts], best, fmt=style, capsize=3, label=label,
                yerr=[[b - min(c["samples"][kind]) for b, c in zip(best, pts)],
                      [max(c["samples"][kind]) - b for b, c in zip(best, pts)]])
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xticks([c["rows"] for c in table["curve"]], [rows_name(c["rows"]) for c in table["curve"]])
ax.set_xlabel("table rows")
ax.set_ylabel(f"ms per step, table's share\n(dot: best of {table['repeats']} rounds;\nbar: to the slowest)")
ax.set_title(f"{P.name}: bigram table update, width {dim},\n{x.numel():,} positions a step (log axes: lines, not bars)",
             fontsize=10)
ax.legend(fontsize=8)
fig.tight_layout()
save_figure(fig, figures / f"04_update_time_{P.name}.png")
fig

# %% [markdown]
# The dense cost grows with the table, as it must: every row is read and written every step. The sparse costs
# depend on the positions a step reads, not on the table's size.

# %% [markdown]
# ## End to end: what the fix buys at each size
#
# The table's share is only part of a step. At the profile's size `frontier bench` builds the three recipes once
# and times their whole training steps in alternation, round by round, so whatever else the machine does touches
# all three alike. `frontier bench` builds a recipe at its profile's shapes and cannot change the table's size, so
# at the larger size the chapter trains each update for a fixed number of steps (`steps=`, one seed, the same
# batches) and reads the median step time from its record: one run each, one after the other, so a drift of the
# machine between them is not cancelled (the reference probe measures that noise, `frontier.train.clock`): a
# difference of several times is far outside it, one of a few percent is not.

# %%
print(format_bench(bench))
print("bigram (sparse) / bigram-dense, round by round: " + ", ".join(f"{r:.2f}x" for r in speed.round_ratios))
print(f"by the rule: {speed.verdict}")

# %%
here_dense, here_sparse = bench_ms["bigram-dense"], bench_ms["bigram"]
size_rows = [
    {"rows": rows_name(rows_here), "how": f"bench, {len(speed.round_ratios)} interleaved rounds (median)",
     "none": bench_ms["compile"], "sparse": here_sparse, "dense": here_dense, "ratio": here_dense / here_sparse,
     "share_dense": here_c["dense_ms"] if here_c else None, "share_sparse": here_c["sparse_ms"] if here_c else None},
    {"rows": rows_name(rows_big), "how": f"one {BIG_STEPS}-step run each (median step)", "none": None,
     "sparse": big_ms["bigram"], "dense": big_ms["bigram-dense"], "ratio": big_ms["bigram-dense"] / big_ms["bigram"],
     "share_dense": big_c["dense_ms"], "share_sparse": big_c["sparse_ms"]},
]
display(Markdown(report.markdown_table(
    size_rows, {"rows": "table rows", "how": "measured by", "none": "no table ms", "sparse": "sparse ms",
                "dense": "dense ms", "ratio": "dense / sparse", "share_dense": "table's share, dense ms",
                "share_sparse": "table's share, sparse ms"},
    {"none": ".0f", "sparse": ".0f", "dense": ".0f", "ratio": ".2f", "share_dense": ".1f", "share_sparse": ".1f"})))

# %%
saved_here = here_dense - here_sparse
saved_big = big_ms["bigram-dense"] - big_ms["bigram"]
display(Markdown(
    f"**What the fix buys.** At the profile's {rows_name(rows_here)} rows the sparse update makes the whole step "
    f"{speed.ratio:.2f}x as fast in tokens/s ({saved_here:+,.0f} ms a step saved, median), with rounds from "
    f"{min(speed.round_ratios):.2f}x to {max(speed.round_ratios):.2f}x: by the rule, {speed.short}. At "
    f"{rows_name(rows_big)} rows{', the write-up' + chr(39) + 's size,' if rows_big == 1 << 19 else ''} the dense step takes {big_ms['bigram-dense']:,.0f} ms and the "
    f"sparse one {big_ms['bigram']:,.0f} ms ({saved_big:+,.0f} ms, {big_ms['bigram-dense'] / big_ms['bigram']:.2f}x): "
    f"in a fixed budget the sparse table trains about {big_ms['bigram-dense'] / big_ms['bigram']:.1f} times the "
    f"steps. The table's own share (eager, from the table bench) says why: dense {here_c['dense_ms'] if here_c else float('nan'):.1f} ms at "
    f"{rows_name(rows_here)} rows and {big_c['dense_ms']:,.1f} ms at {rows_name(rows_big)}, against "
    f"{big_c['sparse_ms']:.1f} ms sparse at {rows_name(rows_big)}."
))

# %% [markdown]
# ## Why not `torch.optim.SparseAdam`?
#
# PyTorch ships a lazy Adam for exactly this case: read the table with `F.embedding(..., sparse=True)`, and the
# backward pass returns a sparse gradient holding only the touched rows; `SparseAdam` updates those rows. Its time is
# in the table bench above. Whether it fits the rest of the design is a separate question, tried here
# (`frontier.study.bench_table.sparseadam_fit`): a compiled step with `fullgraph=True`, and fixed shapes.

# %%
fit = sparseadam_fit()
display(Markdown(
    f"- `torch.compile(fullgraph=True)` of the table's forward and backward: {fit['forward_backward_fullgraph']}; "
    f"the gradient is {fit['gradient']['layout']} with {fit['gradient']['entries']} entries for "
    f"{fit['positions']} positions.\n"
    f"- `torch.compile(SparseAdam.step, fullgraph=True)`: {fit['step_fullgraph']}.\n"
    f"- Rows SparseAdam works on after coalescing, four batches: {fit['coalesced_rows']} (each batch's distinct "
    f"rows: {fit['touched_rows']}): a count that depends on the data, where `SparseRowAdam` keeps batch x sequence "
    f"slots.\n"
    f"- Its bias correction uses one step count for the whole table (`TorchSparseAdam` docstring; a test checks "
    f"it), so a row first touched late moves by a different amount than one touched early; `SparseRowAdam` "
    f"counts per row.\n"
    f"- Eager, on this CPU, at {rows_name(rows_big)} rows: SparseAdam {big_c['torch_sparseadam_ms']:.2f} ms, the "
    f"row-wise update {big_c['sparse_ms']:.2f} ms a step (the table bench's best rounds)."
))

# %% [markdown]
# So speed is not the reason (both are far below the dense update). SparseAdam is not used because its optimiser
# step cannot be compiled into a graph and the number of rows it works on changes with every batch, which on Neuron
# (and in any `fullgraph` compiled step) means a new graph per count; and because its one global step count makes
# the bias correction depend on when a row was first seen. `SparseRowAdam` keeps every shape fixed and counts steps
# per row.

# %% [markdown]
# ## The table as a learning change: val_bpb at equal budget
#
# Does the table help the score in the same charged time? Both groups trained under the profile's reference clock
# for its budget, seeds paired (the same seed gives both the same initial weights for the shared parts and the same
# batches). Every bpb has its steps beside it. The rule asks first for the gain at equal steps: that is the
# leave-one-out of the final recipe (chapter 07), which takes the table out at equal steps; the verdict below
# reads it and says so (where a profile has no such sweep, it rests on the budget and says that).

# %%
display(Markdown(report.runs_table(without + with_table)))
print(format_comparison(groups, diffs))
print(f"by the rule: {table_verdict}")
if at_steps_sweep:
    print(format_sweep(at_steps_sweep))
if rung:
    print(f"the ladder record {ladder.repo_path(record['path'])}, rung {rung['rung']!r}: {ladder.bpb_cell(rung)}; "
          f"{ladder.budget_cell(rung)}; {rung['verdict']}")
if ablation:
    print(format_sweep(ablation))

# %% [markdown]
# The two sweeps above (where this profile has them) ask the same question of later recipes: the final recipe
# (`ema`) with and without the table at equal steps, and `ngram` (the final recipe when the budget-stage
# leave-one-out was trained) with and without it at the same budget, seeds paired.

# %% [markdown]
# ## The table's learning rate: memorising a small corpus
#
# modded-nanogpt trains its bigram table with a high Adam learning rate, and the write-up trained on ClimbMix, where
# 30 minutes never see a token twice. Here a run reads the training split more than once (the epochs below), and a
# table of millions of weights can memorise it: Adam moves a row by about the learning rate every time it is touched, however rare the
# bigram. One seed per learning rate at the profile's budget; the profile's setting is the recipe's seed 0.

# %%
lr_rows = [(lr, ex.run("bigram", P, seed=0, root=run_root, sizes=dict(bigram_lr=lr), label=f"bigram-lr{lr:g}",
                       log=log)) for lr in (0.05, 0.01)]
lr_rows.append((P.bigram_lr, with_table[0]))
display(Markdown(report.markdown_table(
    [{"lr": lr, "train_loss": r["final_train_loss"], "val_bpb": report.bpb(r),
      "epochs": report.epochs(r, data.manifest["train"]["tokens"])} for lr, r in lr_rows],
    {"lr": "table lr (one seed each)", "train_loss": "final train loss (nats)", "val_bpb": "val_bpb (steps)",
     "epochs": "epochs read"}, {"lr": "g", "epochs": ".2f"})))
best_lr, best_r = min(lr_rows, key=lambda t: t[1]["val_bpb"])
display(Markdown(
    f"Lowest val_bpb at lr {best_lr:g} ({report.bpb(best_r)}); one seed each, and the runs took different step "
    f"counts ({', '.join(str(r['steps']) for _, r in lr_rows)}), so a difference smaller than the seed spread of "
    f"the table's group above ({report.bpb_group(with_table)}) is not a finding. Memorising shows as a training "
    f"loss that keeps falling while val_bpb rises."
))

# %% [markdown]
# ## Does the lazy update change what is learned?
#
# The sparse update is not dense AdamW (untouched rows stay put, per-row bias correction). Both train here for the
# **same number of steps** (the median the sparse recipe reached in its budget), so the dense path's slowness does
# not enter.

# %%
n_steps = sorted(r["steps"] for r in with_table)[len(with_table) // 2]
sparse_steps = ex.seeds("bigram", P, root=run_root, steps=n_steps, label=f"bigram-{n_steps}steps", log=log)
dense_steps = ex.seeds("bigram-dense", P, root=run_root, steps=n_steps, label=f"bigram-dense-{n_steps}steps", log=log)
g2, d2 = compare(sparse_steps + dense_steps, paired=True)
print(format_comparison(g2, d2))

# %% [markdown]
# Why would the two differ at all? Most rows are touched by one step and then not again for a long time. Dense AdamW
# moves such a row on that step and then keeps moving it, every later step, with the momentum of that one gradient
# (decaying by $\beta_1$ while the denominator decays by $\sqrt{\beta_2}$); the lazy update moves it once. Measured
# on a one-wide table with learning rate 1 and a unit gradient, the optimiser's own betas:

# %%
travel = travel_after_one_touch(cfg.optim)
display(Markdown(report.markdown_table(
    [{"update": k, "first_step": v["first_step"], "total": v["total"]} for k, v in travel.items()],
    {"update": "update", "first_step": "moved on the touching step", "total": "moved in all"},
    {"first_step": ".3f", "total": ".3f"})))
mult = travel["dense"]["total"] / travel["sparse"]["total"]
display(Markdown(
    f"A rarely touched row's effective learning rate under dense AdamW is about {mult:.1f}x the nominal one. At "
    f"{n_steps} steps, dense - sparse = {d2[0].delta:+.4f} in val_bpb ({d2[0].verdict}; sparse "
    f"{report.bpb_group(sparse_steps)}, dense {report.bpb_group(dense_steps)}). So the lazy update is the fast path, "
    f"and whether it is also the better optimiser depends on whether the extra travel helps a table still learning "
    f"or memorises training bigrams; with more steps the balance can change (records of a longer comparison stay "
    f"under `runs/cpu/bigram-640steps` and `bigram-dense-640steps`, from older code). At Trn2 scale the write-up did "
    f"not report this comparison, and this book has not measured it there."
))

# %% [markdown]
# ## Appendix: where the numbers come from
#
# The rule the verdicts follow, the run records (folders, the code that trained each and the code that reproduced a
# reused one), the bench records, and what the experiments said about each run as the chapter ran.

# %%
print(RULE)
print()
every = without + with_table + list(big.values()) + [r for _, r in lr_rows[:-1]] + sparse_steps + dense_steps
display(Markdown(report.runs_table(every)))
print("runs:\n" + report.provenance(every))
for r in every:
    print(f"  {r['recipe']} s{r['seed']}: {r.get('run_dir')}")
for b in (table, bench):
    print(f"bench record {b['path']} (code {report.short_code(b['code'])})")
if record:
    print(f"ladder record {ladder.repo_path(record['path'])} (code {report.short_code(record.get('code'))})")
for sw in (at_steps_sweep, ablation):
    if sw:
        print(f"sweep record {ladder.repo_path(sw['path'])} (code {report.short_code(sw.get('code'))})")
print("\n".join(log_lines))
