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
# # Chapter 4: the hashed bigram table, and an update that touches only the rows a step reads
#
# A token embedding knows one token, and many next tokens depend on the last two. The write-up's final model
# (theirs, one Trn2 chip) reads a table with a row for every (previous, current) token pair, hashed into 2^19
# rows; its update had been "mostly padding", and fixing it was among the write-up's large gains, for which it
# quotes no separate figure. Does such a table lower bits per byte here, at equal steps and at equal budget? And
# what does it take to train a table of that size without paying for every row at every step?
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
# ## The table
#
# Position $t$ reads row $(36313\,x_t \oplus 27191\,x_{t-1}) \bmod (\text{rows} - 1)$ of the table; the first
# position of a sequence, which has no previous token, reads the reserved last row. The row is multiplied by a
# fixed random sign (one per $(x_{t-1} \oplus x_t) \bmod 8192$, so that two pairs sharing a row tend to cancel
# rather than add) and by a learned scale, and added to the token embedding (`frontier.model.bigram`). The same
# pair always reads the same row, wherever it occurs. On a sentence of the corpus's kind, at the profile's table
# size:

# %%
import torch
from IPython.display import Markdown, display

from frontier.config import BigramConfig
from frontier.model.bigram import BigramEmbedding, bigram_rows, sign_index
from frontier.study.report import markdown_table

tok = ch.data.tokenizer
rows = ch.profile.bigram_rows
ids = torch.tensor([tok.encode("Returns the sum of the elements of the input tensor.")])
row = bigram_rows(ids, rows)[0]
emb = BigramEmbedding(BigramConfig(rows=rows, update="dense"), dim=4, batch_shape=tuple(ids.shape))
sign = emb.signs[sign_index(ids)][0]
pieces = [tok.piece(i) for i in ids[0]]
display(Markdown(markdown_table(
    [{"t": t, "pair": f"({pieces[t - 1] if t else '-'}, {pieces[t]})", "row": int(row[t]), "sign": int(sign[t])}
     for t in range(len(pieces))],
    {"t": "position", "pair": "(previous, current)", "row": f"row of {rows:,}", "sign": "sign"})))

# %% [markdown]
# ("▁of", "▁the") occurs twice and reads one row both times: the table learns what follows "of the", whatever
# came before it. Different pairs can also land on one row: the hash spreads pairs over the rows at random. How
# often, over every distinct pair the training split holds, at the profile's size and at the write-up's 2^19:

# %%
import numpy as np

split = torch.from_numpy(np.concatenate(ch.data.train_tokens()).astype(np.int64))
V = tok.vocab_size
pairs = torch.unique(split[:-1] * V + split[1:])  # every distinct (previous, current) pair of the split
as_batch = torch.stack([pairs // V, pairs % V], 1)  # one two-token sequence per pair: position 1 reads its row
collide = []
for n_rows in sorted({rows, 1 << 19}):
    _, per_row = torch.unique(bigram_rows(as_batch, n_rows)[:, 1], return_counts=True)
    collide.append({"rows": n_rows, "pairs": len(pairs), "used": len(per_row), "per_row": len(pairs) / len(per_row),
                    "shared": float(per_row[per_row > 1].sum()) / len(pairs)})
display(Markdown(markdown_table(collide, {"rows": "table rows", "pairs": "distinct pairs in the split",
                                          "used": "rows they use", "per_row": "pairs a used row",
                                          "shared": "pairs that share their row"},
                                {"per_row": ".2f", "shared": ".1%"})))

# %% [markdown]
# At the cpu profile's 2^16 rows the docstrings split has more distinct pairs than the table has rows, and most
# pairs share their row with another; at 2^19 most pairs have a row of their own.
#
# What the table adds to the token embedding at position $t$ is scale × sign × its row. The table starts at zero,
# so at step 0 the model with the table computes exactly what the model without it computes, and training moves
# only the rows its batches read. With a random table, the output at every position against that formula:

# %%
with torch.no_grad():
    emb.table.normal_()
    out = emb(ids)
    by_hand = emb.scale * sign[:, None] * emb.table[row]
    print(f"output == scale x sign x table[row] at every position: {torch.allclose(out[0], by_hand)}")
    emb.table.zero_()
    print(f"a table at zero adds {float(emb(ids).abs().max()):.1f} everywhere")
print(f"{ch.profile.name} profile: {rows:,} rows x {emb.table.shape[1]} channels here; the model's table is "
      f"{rows:,} x {ch.profile.n_embd} = {rows * ch.profile.n_embd:,} weights")

# %% [markdown]
# ## Why the naive update is mostly padding
#
# Written the obvious way, the table is one more parameter: the backward pass of the lookup writes a gradient for
# every row (zeros almost everywhere), and AdamW reads and writes every row's weight and both its moments, every
# step. A step reads batch × sequence positions. On the profile's table (a few channels wide: the counts do not
# depend on the width), two real training batches, dense AdamW:

# %%
import torch
from IPython.display import Markdown, display

from frontier.data.loader import TrainLoader
from frontier.model.bigram import bigram_rows
from frontier.recipes import resolve
from frontier.study.bench_table import table_setup
from frontier.study.report import markdown_table

cfg = resolve("bigram", ch.profile)
rows, dim = ch.profile.bigram_rows, 4
loader = TrainLoader(ch.data.train_tokens(), ch.profile.seq_len, ch.profile.batch_size, seed=0)
batches = [loader.next_batch()[0] for _ in range(2)]
emb, upd = table_setup("dense", rows, dim, tuple(batches[0].shape), cfg.optim, lr=cfg.model.bigram.lr)
gen = torch.Generator().manual_seed(0)
for step, x in enumerate(batches, 1):
    read = torch.zeros(emb.table.shape[0], dtype=torch.bool)
    read[bigram_rows(x, rows).flatten()] = True
    before = emb.table.detach().clone()
    emb(x).backward(torch.randn(*x.shape, dim, generator=gen))
    nonzero = int((emb.table.grad != 0).any(1).sum())
    upd.step(x, 1.0)
    upd.zero_grad()
    moved = (emb.table.detach() != before).any(1)
    print(f"step {step}: {x.numel():,} positions read {int(read.sum()):,} distinct rows of {rows:,}; the gradient "
          f"has {nonzero:,} non-zero rows; AdamW rewrote the weights and both moments of all {rows:,}; rows that "
          f"moved: {int(moved.sum()):,}, of which {int((moved & ~read).sum()):,} this step never read")

# %% [markdown]
# The gradient is zero outside the rows the batch read, yet the optimiser does the same work on every row. The
# second step also moves rows it never read: dense AdamW carries the first step's momentum on every row it has
# ever touched. The share of the table one batch of the profile's shape reads, at table sizes up to the
# write-up's:

# %%
from frontier.study.bench_table import touched_rows

share = [{"rows": r, "touched": touched_rows(batches[0], r), "share": touched_rows(batches[0], r) / r}
         for r in (1 << 16, 1 << 17, 1 << 18, 1 << 19)]
display(Markdown(markdown_table(share, {"rows": "table rows", "touched": f"rows one batch reads ({batches[0].numel():,} "
                                        "positions)", "share": "share of the table"}, {"share": ".2%"})))

# %% [markdown]
# ## The fix: Adam on the touched rows only
#
# With `update="sparse"` (recipe `bigram`), the forward pass gathers the rows it reads without asking autograd for
# the table's gradient, and adds a zero "sink" of the batch's shape to them: after `backward()` the sink's gradient
# is each position's row gradient. `SparseRowAdam` (`frontier.optim.bigram_update`) sums those per row, in a fixed
# number of slots (batch × sequence: no shape depends on how many rows were distinct, so a compiled or XLA graph
# never changes), and runs Adam on those rows only, each with its own moments and its own count of updates.
#
# Dense AdamW and the sparse update on one small table, the same two steps: step 2's batch shares two pairs with
# step 1's (besides the row every first position reads), and has new ones. Where do the two tables differ?

# %%
import torch
from IPython.display import Markdown, display

from frontier.model.bigram import bigram_rows
from frontier.recipes import resolve
from frontier.study.bench_table import table_setup, table_step
from frontier.study.report import markdown_table

cfg = resolve("bigram", ch.profile)
rows, dim = 64, 4
steps = [torch.tensor([[1, 2, 3, 4, 5, 6]]), torch.tensor([[1, 2, 3, 7, 8, 9]])]  # (1, 2), (2, 3) in both
gen = torch.Generator().manual_seed(0)
grads = [torch.randn(1, 6, dim, generator=gen) for _ in steps]
after = {}
for kind in ("dense", "sparse"):
    emb, upd = table_setup(kind, rows, dim, (1, 6), cfg.optim, lr=cfg.model.bigram.lr)
    after[kind] = []
    for x, g in zip(steps, grads):
        table_step(emb, upd, x, g)
        after[kind].append(emb.table.detach().clone())
first, second = (set(bigram_rows(x, rows)[0].tolist()) for x in steps)
every = set(range(rows + 1))
groups = {"read at steps 1 and 2": first & second, "read at step 2 only": second - first,
          "read at step 1 only": first - second, "never read": every - first - second}
table = []
for name, rws in groups.items():
    i = torch.tensor(sorted(rws))
    table.append({"rows": name, "n": len(rws),
                  "diff1": float((after["dense"][0][i] - after["sparse"][0][i]).abs().max()),
                  "diff2": float((after["dense"][1][i] - after["sparse"][1][i]).abs().max()),
                  "dense_moved": float((after["dense"][1][i] - after["dense"][0][i]).abs().max()),
                  "sparse_moved": float((after["sparse"][1][i] - after["sparse"][0][i]).abs().max())})
display(Markdown(markdown_table(table, {"rows": "rows", "n": "how many", "diff1": "max |dense - sparse| after step 1",
                                        "diff2": "after step 2", "dense_moved": "moved at step 2, dense",
                                        "sparse_moved": "moved at step 2, sparse"},
                                {k: ".1e" for k in ("diff1", "diff2", "dense_moved", "sparse_moved")})))

# %% [markdown]
# From a fresh state the two updates agree on every row a step reads as long as those rows have had the same
# number of updates (step 1; the rows read at both steps). They differ in two places, both about rows a step does
# not read. Dense AdamW keeps moving a row after the step that read it, with the decaying momentum of that one
# gradient; the sparse update leaves it where it is. And dense AdamW corrects a row's moments by the global step
# count, the sparse update by the row's own count, so a row first read at step 2 moves by a different amount. How
# far a row read once, late in training, travels in all under each (a one-wide table, learning rate 1, a unit
# gradient, the recipe's betas; `travel_after_one_touch`):

# %%
from frontier.study.bench_table import travel_after_one_touch

travel = travel_after_one_touch(cfg.optim)
display(Markdown(markdown_table(
    [{"update": k, "first_step": v["first_step"], "total": v["total"]} for k, v in travel.items()],
    {"update": "update", "first_step": "moved on the step that read it", "total": "moved in all, 50 steps later"},
    {"first_step": ".3f", "total": ".3f"})))

# %% [markdown]
# So the sparse update is not dense AdamW made fast: a rarely read row's effective step is several times smaller.
# Whether that learns better or worse is a question for trained models, which the last section asks of the
# sparse update only (the recipe `bigram`).

# %% [markdown]
# ## The update alone: time against table size
#
# The table's whole share of a training step (the gather, the backward into the table, the update), timed in
# alternation round by round (`frontier bench-table`, kept as a bench record under the run root): dense AdamW, the
# sparse update, and PyTorch's own lazy Adam (`torch.optim.SparseAdam`, the table read with a sparse gradient). A
# random gradient stands in for the rest of the network; the batch is the profile's.

# %%
from frontier.data.loader import TrainLoader
from frontier.figures import new_figure
from frontier.recipes import resolve
from frontier.study import experiments as ex
from frontier.study.bench_table import format_table_bench

smoke = ch.profile.dry_run  # smoke, trn2-dry: a small bench that checks the code
dim = resolve("bigram", ch.profile).model.n_embd
x, _ = TrainLoader(ch.data.train_tokens(), ch.profile.seq_len, ch.profile.batch_size, seed=0).next_batch()
sizes = [1 << 10, 1 << 11, 1 << 12, 1 << 13] if smoke else [1 << 16, 1 << 17, 1 << 18, 1 << 19]
bench = ex.table_bench(sizes, dim, x, ch.profile, root=ch.root, steps=2 if smoke else 5, repeats=2 if smoke else 5)
print(format_table_bench(bench))

# %%
fig, ax = new_figure(6.4, 3.9)
curve = bench["curve"]
for kind, style, label in (("dense", "o-", "dense AdamW"), ("sparse", "o-", "sparse update (SparseRowAdam)"),
                           ("torch-sparseadam", "s--", "torch.optim.SparseAdam")):
    best = [c[kind.replace("-", "_") + "_ms"] for c in curve]
    ax.errorbar([c["rows"] for c in curve], best, fmt=style, capsize=3, label=label,
                yerr=[[b - min(c["samples"][kind]) for b, c in zip(best, curve)],
                      [max(c["samples"][kind]) - b for b, c in zip(best, curve)]])
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xticks([c["rows"] for c in curve], [f"2^{c['rows'].bit_length() - 1}" for c in curve])
ax.set_xlabel("table rows")
ax.set_ylabel(f"ms a step, the table's share\n(dot: best of {bench['repeats']} rounds;\nbar: to the slowest)")
ax.set_title(f"{ch.profile.name}: the table's update, {dim} wide, {x.numel():,} positions a step\n"
             "(log axes)", fontsize=10)
ax.legend(fontsize=8)
ch.figure(fig, "04_update_time")  # figures/04_update_time_PROFILE.png

# %%
big = curve[-1]
print(f"at 2^{big['rows'].bit_length() - 1} rows: dense {big['dense_ms']:.1f} ms, sparse {big['sparse_ms']:.1f} ms a "
      f"step (dense / sparse {big['ratio']:.1f}x); from the smallest size to the largest the dense update grows "
      f"{big['dense_ms'] / curve[0]['dense_ms']:.1f}x, the sparse one {big['sparse_ms'] / curve[0]['sparse_ms']:.1f}x")

# %% [markdown]
# The dense update's time grows with the table, as it must: it reads and writes every row. The sparse update's
# depends on the positions a step reads, not on the table. `torch.optim.SparseAdam` is as fast, but the number of
# rows it works on changes with every batch (a new graph for every count, wherever the step is compiled), and its
# bias correction counts one step for the whole table; `SparseRowAdam` keeps every shape fixed and counts per row.
# At the cpu profile's 2^16 rows, the budget's steps already price the update in: the committed cost table's
# `bigram` step (sparse) costs 380 reference ms against `bigram-dense`'s 428
# (`runs/bench/cpu/costs-cpu-20261204-041113.json`).

# %% [markdown]
# ## The table as a learning change
#
# The table changes what the model computes, so the rule (`frontier.study.compare.RULE`) judges it at equal steps
# first, paired by seed, then at equal budget. At equal steps: the recipe `ema` with and without its table, 400
# steps, 5 seeds (the runs of `frontier ablate --recipe ema --steps 400`, the fullest recipe when the table was
# judged; the ladder, in the README and chapter 07, reads the same measurement from the final's own leave-one-out,
# the recipe the table ended in, so its figure differs from this one by what the recipes around the table change).
# At equal budget: `bigram` against
# the rung below it, `compile` (the same network without the table), where the budget buys `bigram` fewer steps
# than `compile`. Validation decides; test is reported beside it.

# %%
from IPython.display import Markdown, display

from frontier.study.ablation import without
from frontier.study.compare import keep, paired_gain
from frontier.study.report import markdown_table

SEEDS = ch.profile.seeds  # the ladder's 5 seeds (smoke: 2, which checks the code only)
STEPS = 3 if ch.profile.dry_run else 400  # the leave-one-out's equal steps
with_table = [ch.run("ema", s, steps=STEPS, label=f"ema-{STEPS}steps") for s in range(SEEDS)]
no_table = [ch.run(without("ema", "bigram"), s, steps=STEPS, label=f"ema-no-bigram-{STEPS}steps")
            for s in range(SEEDS)]
compiled, bigram = ch.seeds("compile", SEEDS), ch.seeds("bigram", SEEDS)
scores = ["val_bpb", "test_bpb"] if ch.data.has_test else ["val_bpb"]
stages = {"equal steps": (no_table, with_table), "equal budget": (compiled, bigram)}
names = {"equal steps": ("`ema` without the table", "`ema`"), "equal budget": ("`compile`", "`bigram`")}
gains = {(stage, s): paired_gain(a, b, s) for stage, (a, b) in stages.items() for s in scores}
steps_of = lambda recs: "-".join(map(str, sorted({r["steps"] for r in recs})))
pv = lambda p: "p < 0.001" if p < 0.001 else f"p = {p:.3f}"
display(Markdown(markdown_table(
    [{"stage": stage, "without": f"{names[stage][0]} ({steps_of(a)} steps)",
      "with": f"{names[stage][1]} ({steps_of(b)} steps)",
      **{s: f"{gains[stage, s][0]:+.4f} ({pv(gains[stage, s][1])})" for s in scores}}
     for stage, (a, b) in stages.items()],
    {"stage": "stage", "without": "without the table", "with": "with it",
     **{s: f"gain on {s.split('_')[0]} ({SEEDS} seeds, paired)" for s in scores}})))
kept, why = keep(gains["equal steps", "val_bpb"], gains["equal budget", "val_bpb"])
print(f"by the rule: {'kept' if kept else 'dropped' if kept is False else 'not shown'}: {why}")

# %%
from frontier.figures import new_figure

fig, ax = new_figure(6.4, 3.6)
for i, (stage, (a, b)) in enumerate(stages.items()):
    for j, s in enumerate(scores):
        each = [ra[s] - rb[s] for ra, rb in zip(a, b)]  # the same seed in both lists
        pos = i + (j - (len(scores) - 1) / 2) * 0.25
        ax.scatter([pos] * len(each), each, s=16, color=f"C{j}", label=s if i == 0 else None)
        ax.plot([pos + 0.08], [sum(each) / len(each)], "_", color=f"C{j}", ms=14, mew=2)
ax.axhline(0, color="grey", lw=0.8)
ax.set_xticks(range(len(stages)), [f"{stage}\n({steps_of(b)} steps with, {steps_of(a)} without)"
                                   for stage, (a, b) in stages.items()])
ax.set_xlim(-0.6, len(stages) - 0.4)
ax.set_ylabel("gain with the table (bpb)\n(each seed; bar: the mean)")
ax.set_title(f"{ch.profile.name}: the table's gain, paired by seed ({SEEDS} seeds)", fontsize=10)
ax.legend(fontsize=8)
ch.figure(fig, "04_gains")  # figures/04_gains_PROFILE.png

# %% [markdown]
# At equal budget the table pays for itself: its lookup and update cost steps (`bigram`'s step is dearer than
# `compile`'s), and the gain survives the steps it costs.

# %% [markdown]
# ## What this chapter found

# %%
from frontier.study.ablation import without
from frontier.study.bench_records import load_bench_record
from frontier.study.chapter import machine
from frontier.study.compare import keep, paired_gain

SEEDS = ch.profile.seeds
STEPS = 3 if ch.profile.dry_run else 400
with_table = [ch.run("ema", s, steps=STEPS, label=f"ema-{STEPS}steps") for s in range(SEEDS)]
no_table = [ch.run(without("ema", "bigram"), s, steps=STEPS, label=f"ema-no-bigram-{STEPS}steps")
            for s in range(SEEDS)]
compiled, bigram = ch.seeds("compile", SEEDS), ch.seeds("bigram", SEEDS)
test = ch.data.has_test
g_steps, g_budget = paired_gain(no_table, with_table), paired_gain(compiled, bigram)
t_steps = paired_gain(no_table, with_table, "test_bpb") if test else None
t_budget = paired_gain(compiled, bigram, "test_bpb") if test else None
kept, _ = keep(g_steps, g_budget)
benches = sorted((ch.root / ch.profile.name / "bench").glob("bench-table-*.json"))
big = load_bench_record(benches[-1])["curve"][-1] if benches else None
pv = lambda p: "p < 0.001" if p < 0.001 else f"p = {p:.3f}"
cell = lambda g, t: f"{g[0]:+.4f} val ({pv(g[1])})" + (f", {t[0]:+.4f} test ({pv(t[1])})" if t else "")
headline = "lowers bits per byte" if kept else "is not shown to lower bits per byte"
box.update(
    f"**The hashed bigram table ({ch.profile.bigram_rows:,} rows) {headline}.** At {STEPS} steps, `ema` "
    f"with it against without: {cell(g_steps, t_steps)}. At equal budget, `bigram` ({bigram[0]['steps']} steps) "
    f"over `compile` ({compiled[0]['steps']}): {cell(g_budget, t_budget)}. {SEEDS} seeds, paired; "
    f"{machine()}. By the rule: **{'kept' if kept else 'dropped' if kept is False else 'not shown'}**."
    + (f" Its sparse update: at 2^{big['rows'].bit_length() - 1} rows the table's share of a step is "
       f"{big['sparse_ms']:.1f} ms against dense AdamW's {big['dense_ms']:.0f} ms." if big else ""))
print(box.text)

# %% [markdown]
# ## Records
#
# The runs and the bench record this chapter quoted, the code that made them, and what the experiments said.

# %% jupyter={"outputs_hidden": true}
from frontier.study.ablation import without
from frontier.study.bench_records import load_bench_record

SEEDS = ch.profile.seeds
STEPS = 3 if ch.profile.dry_run else 400
recs = ([ch.run("ema", s, steps=STEPS, label=f"ema-{STEPS}steps") for s in range(SEEDS)]
        + [ch.run(without("ema", "bigram"), s, steps=STEPS, label=f"ema-no-bigram-{STEPS}steps") for s in range(SEEDS)]
        + ch.seeds("compile", SEEDS) + ch.seeds("bigram", SEEDS))
benches = [load_bench_record(p) for p in sorted((ch.root / ch.profile.name / "bench").glob("bench-table-*.json"))[-1:]]
ch.records(recs, benches)
