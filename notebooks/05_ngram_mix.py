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
# # Chapter 6: the n-gram mix, counted during the run and mixed into the logits
#
# While the network trains, an n-gram model is counted from the training tokens, and at every position its
# prediction over the **whole** vocabulary, computed from the context alone, is added to the network's logits
# before the softmax, which renormalises. It is a **learning change** (it changes what is computed), so the
# project's rule (`frontier.study.compare.RULE`) judges it by a paired gain over the rung below, `bigram`, at equal
# steps first and then at equal budget. The box below is computed from the ladder's and the ablation's records
# when the chapter runs.

# %% tags=["parameters"]
profile = "cpu"
run_root = "../runs"
figures_dir = "../figures"

# %%
from pathlib import Path

import matplotlib
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.ticker import MaxNLocator
import numpy as np
import torch
from IPython.display import Markdown, display

from frontier.data.dataset import profile_dataset
from frontier.data.loader import TrainLoader, eval_windows
from frontier.devices import select_device
from frontier.figures import loss_curve_figure, new_figure, save_figure
from frontier.model.ngram import explain_positions, false_hit_rate, shard_batches
from frontier.model.ngram.mix import NGramMix
from frontier.profiles import get_profile
from frontier.recipes import resolve
from frontier.study import experiments as ex
from frontier.study import report
from frontier.study.bench import format_bench
from frontier.study.bench_ngram import format_ngram_bench, run_ngram_bench
from frontier.study.compare import RULE, compare, format_comparison
from frontier.study.compressors import compressor_bpb
from frontier.study.ladder import (WRITEUP_TRN2, bpb_cell, judged_rows, ladder_rows, latest_ladder_record,
                                   repo_path, steps_span)
from frontier.study.ngram_orders import DEFAULT_VARIANTS, format_order_curve, run_order_curve
from frontier.study.sweep import newest_sweep
from frontier.train.trainer import build_model, evaluate_run, load_run_model

P = get_profile(profile)
figures = Path(figures_dir)
log_lines = []  # what the experiments say about reusing or training each run: printed in the appendix
log = log_lines.append
data = profile_dataset(P, log=log)
print(ex.code_banner())

# %%
# The n-gram rung and the rung below it (`bigram`: the same network, no counts), as the ladder judged them (its
# newest record for this profile; without one, this execution's runs judged the same way), and the leave-one-out
# ablation's row that takes the mix out of `ngram` at the same budget.
before = ex.seeds("bigram", P, root=run_root, log=log)
shards = ex.seeds("ngram", P, root=run_root, log=log)
ladder_rec = latest_ladder_record(P.name, root=run_root)
if ladder_rec is not None:
    rungs = {r["recipe"]: r for r in judged_rows(ladder_rec["rows"]) if "mean" in r}
    ladder_from = f"the ladder record `{repo_path(ladder_rec['path'])}`"
else:
    rungs = {r["recipe"]: r for r in ladder_rows({"bigram": before, "ngram": shards}) if "mean" in r}
    ladder_from = f"this execution's runs (no ladder record for the `{P.name}` profile)"
rung = rungs["ngram"]
below = rungs[rung["over"]]
sweep = newest_sweep(run_root, P.name, "ablation-final-budget")
loo = None if sweep is None else next((r for r in sweep["rows"] if r.get("recipe") == "bigram" and "gain" in r), None)
if loo is None:
    loo_text = f"the leave-one-out ablation has no record for the `{P.name}` profile"
else:
    base_row = next(r for r in sweep["rows"] if "gain" not in r)
    runs_of = lambda row: sorted(repo_path(v["run_dir"]) for v in row["runs"].values())
    same = runs_of(loo) == sorted(below["runs"]) and runs_of(base_row) == sorted(rung["runs"])
    loo_text = (f"the leave-one-out ablation (sweep `{sweep['name']}`) takes the mix out of `ngram`: "
                f"{-loo['gain']:+.4f} bpb worse (p = {loo['p']:.3f}, {loo['verdict']}), "
                + ("read from the same runs, so not a second measurement" if same else
                   f"from runs of its own ({steps_span([v['steps'] for v in loo['runs'].values()])} without the mix)"))
# the mix measured at equal steps, where a sweep did: on the sized recipe `ngram-tuned` (not the ladder's rung)
tuned = newest_sweep(run_root, P.name, "ablation-ngram-400")
tuned_row = None if tuned is None else next((r for r in tuned["rows"] if r.get("name") == "- n-gram mix"), None)
gain_spread = f" ± {rung['gain_std']:.4f}" if rung.get("gain_std") == rung.get("gain_std") and rung["n"] > 1 else ""
gain_p = f", p = {rung['p']:.3f}" if rung.get("p") is not None and rung["p"] == rung["p"] else ""  # NaN: no test
equal_steps_note = "" if rung.get("equal_steps") else (
    " (the rule asks first for a gain at equal steps; no sweep measured `ngram` against `bigram` at equal steps"
    + ("" if tuned_row is None else
       f"; on the sized recipe `{tuned['base']}`, taking the mix out at {tuned['steps']} steps cost "
       f"{-tuned_row['gain']:+.4f} bpb, p = {tuned_row['p']:.3f}, {len(tuned['seeds'])} seeds, sweep `{tuned['name']}`")
    + ")")
display(Markdown(report.finding_box(
    "the n-gram mix",
    f"the mix was worth about {WRITEUP_TRN2['ngram_gain']} bpb, their largest late gain, against a run-to-run noise "
    f"of up to {WRITEUP_TRN2['noise']} bpb (their data, tokenizer and 14 x 512 network: not comparable with ours "
    "number for number)",
    f"`ngram` {bpb_cell(rung)} against `bigram` {bpb_cell(below)} at equal budget: gain "
    f"**{rung['gain']:+.4f}{gain_spread} bpb** (paired by seed{gain_p}), from {ladder_from}; "
    f"{loo_text}",
    f"{rung['verdict']}{equal_steps_note}",
)))

# %% [markdown]
# ## The mechanism
#
# Public attempts at this were often invalid: hashing the *target* into the lookup key gives a "distribution" that
# does not sum to one, and scores far below any real model came out of that bug (the figures are in
# `shared/reference/recipes.md`, theirs). A valid mix adds, at every position, a bias over the **whole** vocabulary
# computed from the context alone. These are the package's lines that are the idea: the dense bias evaluation adds,
# and the sparse form a training batch adds (`frontier/model/ngram/mix.py`):

# %%
display(Markdown(report.source_of(NGramMix.bias, NGramMix.add_to)))
train_tokens = data.manifest["train"]["tokens"]
print(f"a run of `ngram` reads the training split {min(report.epochs(r, train_tokens) for r in shards):.2f}-"
      f"{max(report.epochs(r, train_tokens) for r in shards):.2f} times ({train_tokens:,} training tokens)")
for name in ("ngram", "ngram-tables", "ngram-ctx"):
    n = resolve(name, P).model.ngram
    print(f"{name}: contexts up to {n.max_order} tokens; {n.slots_short} continuations per one-token context; "
          f"2^{n.buckets_log2} buckets per longer context length, {n.slots} continuations per bucket; check bits "
          f"{n.check_bits}; {n.smoothing}; mixer {n.mixer}; {n.folds} folds")

# %% [markdown]
# `frontier/model/ngram/` builds a mix that is valid by construction (its module docstring has every formula). The
# chapter shows the mix as first built (recipe `ngram`, the ladder's rung), then what was wrong with its counts and
# the tables that fix it (`ngram-tables`), then mixing that depends on the context (`ngram-ctx`).
#
# - **Tables.** Unigram counts (add-one smoothed) for context length 0. For context length 1, every token keeps
#   its total $N$, its number of distinct continuations $T$ and its `slots_short` most frequent continuations.
#   Contexts of 2 to `max_order` tokens are hashed into `2^buckets_log2` buckets per length, each bucket keeping
#   $N$, $T$ and its `slots` most frequent continuations. Whatever a context counted outside its slots joins its
#   back-off mass. Memory is fixed when the model is built (each recipe's sizes are printed above).
# - **Check bits** (`check_bits`; none in `ngram`): every bucket also holds a fingerprint of the context that owns
#   it (the first one counted there). Counts of any other context landing in that bucket are dropped, and reading
#   such a context finds it unseen, so it backs off. Without them an unseen context that lands in an occupied
#   bucket reads its occupant's counts: a *false hit*.
# - **Smoothing.** Interpolated, so that each $P_k$ is a proper distribution over the whole vocabulary:
#   $P_k(\cdot \mid c) = a_k P_{k-1}(\cdot \mid c') + s_k$, with $s_k$ non-zero on the context's slots only and
#   $a_k$ its escape. `ngram` uses Witten-Bell (PPM's escape method C): slot counts weigh $1/(N+T)$ each.
#   `ngram-tables` uses modified absolute discounting (Chen and Goodman's three discounts $D_1, D_2, D_{3+}$,
#   estimated from the tables' count-of-counts per context length): each slot loses its discount, and what the
#   slots lose plus the unlisted mass is the escape.
# - **The mixture.** $P_\text{mix} = \sum_k \pi_k P_k$ over context lengths 0 to `max_order`. In `ngram` and
#   `ngram-tables`, $\pi$ is the softmax of learned logits: one global weight per length. In `ngram-ctx`, $\pi$
#   and the bias scale are computed **per position**: the global logits plus a small linear layer (starting at
#   zero) of the position's count features, per context length whether the context is known, $\log(1 + N)/8$ and
#   $T/(N+T)$. It reads the tables only, never the network.
# - **The bias** (the lines above). $\text{bias}_t = (1 - s) \log \text{floor}_t + s \log P_\text{mix}(\cdot \mid
#   x_{\le t})$, where $\text{floor}_t = \text{coef}_0 P_0$ is the part of $P_\text{mix}$ that backed off all the
#   way to the unigram and $s$ is a learned scale ($s = 1$: the n-gram distribution itself). It is added to the
#   network's capped logits before the one softmax, which renormalises.
# - **Training and evaluation read the tables differently.** A training batch of fold $f$ reads the *other*
#   fold's tables, in a sparse form: the dense vector $\log P_0$ plus corrections scattered at the tokens that
#   have entries, which equals the bias up to a per-position constant that the softmax cancels (so nothing of
#   size batch x sequence x vocabulary is built besides the logits). Evaluation (uncharged) computes the dense
#   formula from the **average of both folds'** $P_\text{mix}$ and floors, with the tables as they stand at the
#   end of training.
# - **Counting** sees training tokens only: the training shards counted up front inside the charged clock (recipe
#   `ngram` and its descendants), or batches as they stream past (`ngram-stream`: the first epoch, after the step
#   that used them).
# - **Cross-fitting.** Two sets of tables: window $i$ of the training split belongs to fold $i \bmod 2$, every
#   batch comes from one fold, and a batch reads only the *other* fold's counts. Without this, a run that reads
#   its data more than once (ours do: the epochs are printed above) trains the mixture on counts that already
#   contain the answer.

# %% [markdown]
# ## What the tables hold, and what counting costs
#
# The training shards counted once, as the `shards` counting mode does at the start of a run, into the tables of
# `ngram` and of `ngram-tables`.

# %%
tables = {}
for name in ("ngram-only", "ngram-only-tables"):
    ng = build_model(resolve(name, P)).ngram
    seconds = ng.count_tokens(data.train_tokens(), P.seq_len)
    tables[name] = ng
    s = ng.summary()
    print(f"{name}: counted {s['counted_tokens']:,} training tokens in {seconds:.1f} s "
          f"({s['counted_tokens'] / seconds:,.0f} tokens/s); tables {s['table_mib']:.0f} MiB")
ng = tables["ngram-only"]
used = ng.summary()["contexts_in_use"]
display(Markdown(report.markdown_table(
    [{"context": k + 1, "contexts_in_use": n,
      "share": n / (P.vocab_size if k == 0 else 1 << ng.cfg.buckets_log2) / ng.cfg.folds}
     for k, n in enumerate(used)],
    {"context": "context length", "contexts_in_use": "contexts in use (both folds)", "share": "share of the table"},
    {"share": ".1%"})))

# %% [markdown]
# The table's last column is the share of buckets that hold counts. Without check bits, that is also the chance that a
# validation context never seen in training reads somebody else's counts. `false_hit_rate` measures it exactly:
# a validation position's context is unseen when its 64-bit hash is the hash of no context counted into that fold,
# and it is a false hit when the tables report it seen anyway.

# %%
false_hits = {name: false_hit_rate(t, shard_batches(data.train_tokens(), P.seq_len, t.cfg.folds),
                                   data.val_tokens(), P.seq_len) for name, t in tables.items()}
for name, fh in false_hits.items():
    print(f"{name}: {fh['false_hits']:,} false hits among {fh['unseen']:,} unseen validation contexts "
          f"(lengths 2-{tables[name].K}): {fh['false_hit_rate']:.2%}; counted contexts read as unseen "
          f"(their counts dropped by check bits): {fh['miss_rate']:.2%}")

# %% [markdown]
# ## Why it is valid: checks on a real batch
#
# 1. The bias at position $t$ must not change when the target at $t$ (or any later token) changes, in evaluation
#    and for a training batch.
# 2. Softmax of the mixed logits sums to one, and so does the n-gram distribution itself.
# 3. A training batch never reads its own fold's counts.
# 4. A context never counted gets no counts (with check bits), and the tables never see validation tokens (the
#    test suite trains twice with different validation sets and compares the tables bit for bit).

# %%
ng = tables["ngram-only-tables"]
loader = TrainLoader(data.train_tokens(), P.seq_len, P.batch_size, seed=123, folds=2)
x, y = loader.next_batch()
x = x[:2]
t = P.seq_len // 2
changed = x.clone()
changed[:, t + 1 :] = torch.randint(0, P.vocab_size, changed[:, t + 1 :].shape)  # the target at t and everything after
for fold, what in [(None, "evaluation"), (loader.batch_fold, f"training batch of fold {loader.batch_fold}")]:
    same = torch.equal(ng.bias(x, fold)[:, : t + 1], ng.bias(changed, fold)[:, : t + 1])
    print(f"{what}: bias at positions <= {t} unchanged when the target at {t} and all later tokens change: {same}")
p = ng.distribution(x).detach()
logits = torch.randn(2, P.seq_len, P.vocab_size) + ng.bias(x).detach()
print(f"n-gram distribution sums: min {p.sum(-1).min():.6f}, max {p.sum(-1).max():.6f}")
print(f"softmax(logits + bias) sums: min {torch.softmax(logits, -1).sum(-1).min():.6f}, "
      f"max {torch.softmax(logits, -1).sum(-1).max():.6f}")
print(f"a batch of fold {loader.batch_fold} reads the tables of fold {ng.tables_for(loader.batch_fold)}")
noise = torch.randint(0, P.vocab_size, (1, P.seq_len))  # random tokens: their long contexts were never counted
print(f"random tokens: contexts of length >= 8 reported seen: {int(ng.known(noise, 0)[6:].sum())} of "
      f"{int(ng.known(noise, 0)[6:].numel())} (check bits on)")

# %% [markdown]
# What happens without cross-fitting: `ngram-insample` reads the same tables it was counted into, so during
# training every context already holds the batch's own continuation. One seed is enough to see it:

# %%
insample = ex.run("ngram-insample", P, seed=0, root=run_root, log=log)
print(f"in-sample counts: val_bpb {report.bpb(insample)}; learned scale on the bias {insample['ngram']['scale']:.2f}")

# %% [markdown]
# ## What it costs per step
#
# A training step adds the bias in its sparse form (`NGramMix.bias_parts`): it gathers every context's slots (in
# `ngram` up to 32 + 15 x 4 = 92 entries per position, in `ngram-tables` 256 + 15 x 8 = 376), sorts them so that
# entries for the same token can be summed, takes a log, and scatter-adds the corrections into the logits beside
# the dense $\log P_0$. The bias runs eagerly even in a compiled model (its integer hashing must match the eager
# counting bit for bit). Side by side with the recipe without it, in alternation:

# %%
bench = ex.bench(["bigram", "ngram", "ngram-stream", "ngram-tables", "ngram-ctx"], P, root=run_root,
                 steps=10 if P.name != "smoke" else 3, repeats=3 if P.name != "smoke" else 2, memory=False, log=log)
print(format_bench(bench))
rate = {r["recipe"]: r["tokens_per_s_median"] for r in bench["rows"]}
overhead = {name: 1 - rate[name] / rate["bigram"] for name in rate if name != "bigram"}
print("share of step time the bias takes: " + ", ".join(f"{k} {100 * v:.1f}%" for k, v in overhead.items()))

# %% [markdown]
# ## Counting the shards up front, or batches as they pass?
#
# Counting the shards first costs charged seconds once and gives full tables from step 0. Streaming costs a
# little every step of the first epoch, and early in the run the tables are nearly empty. Both at equal budget:

# %%
stream = ex.seeds("ngram-stream", P, root=run_root, log=log)  # `shards`: the `ngram` runs of the box
print(f"val_bpb counting the shards {report.bpb_group(shards)}; streaming {report.bpb_group(stream)}")
g_count, d_count = compare(shards + stream)
print(format_comparison(g_count, d_count))
print(f"counting the shards took {shards[0]['ngram']['counting_s']:.1f} charged seconds of {P.budget_s:g}")

# %% [markdown]
# ## How fast counting is
#
# `count_tokens` counts tables on the CPU in NumPy: per table group one sort of the batch's (context, next
# token) pairs gives the distinct pairs, their counts and each context's segment, and each fold is counted on a
# thread of its own. The original torch counting still counts tables that live on an accelerator. Both count the
# same tables, bit for bit; `frontier bench-ngram` times them in alternation:

# %%
counting = run_ngram_bench(P.name, "ngram-tables", repeats=3 if P.name != "smoke" else 1, log=lambda *a: None,
                           out=Path(run_root) / P.name / "bench")
print(format_ngram_bench(counting))
count_rate = counting["rows"][0]["tokens_per_s_median"]

# %% [markdown]
# **Counting beside an accelerator at Trn2 scale** (a design note; nothing here ran on a Trn2). At the `trn2`
# profile the tables are about 1.7 GiB (2^20 buckets per length, a 2^28-bit seen set), read and written at random
# per pair: host work that a NeuronCore's matrix units do not help with. The plan is to count on the host,
# overlapped with the steps: the batch of step $s$ goes to a counting thread once step $s$ has used it (stream
# counting), and since a batch of fold $f$ reads only the other fold's tables, counting fold $f$ never races a read
# of fold $f$. That holds while host counting keeps up with the run's token rate (32 x 2,048 tokens per step
# divided by the seconds per step). Counting the shards up front instead costs (train tokens) / (tokens per
# second) charged seconds, which at billions of tokens and the rate above does not fit a 1,800 s budget.
# Counting on the device (sort and segment ops) stays possible through the torch counting, at the price of device
# time and memory every step.

# %% [markdown]
# ## The n-gram model alone: what the counts were missing
#
# The first `ngram` tables were built to be cheap inside a step, and alone they score far behind PPMd. To see
# why without a learned mixture in the way, `frontier ngram-orders` counts the shards into each kind of table
# and scores the validation split by the **longest context alone**, $P_k$ for $k = 0, 1, \ldots, 16$ (the
# mixture one-hot at $k$; $P_k$ backs off through every shorter length by the smoothing). A proper back-off makes
# the curve fall as $k$ grows; where it rises, the longer contexts hurt.

# %%
variants = DEFAULT_VARIANTS if P.name != "smoke" else {
    k: DEFAULT_VARIANTS[k] for k in ("absolute-modified", "absolute-modified+check", "absolute-modified+check+all",
                                     "absolute-modified+check+short 256")}
orders = run_order_curve(P.name, variants=variants, data=data, log=lambda *a: None,
                         orders=None if P.name != "smoke" else [0, 1, 2, 4, 16], out=Path(run_root) / P.name / "bench")
print(format_order_curve(orders))
fig, ax = new_figure(7.2, 4.2)
for row in orders["rows"]:
    ks = [s["order"] for s in row["scores"] if np.isfinite(s["val_bpb"])]
    vs = [s["val_bpb"] for s in row["scores"] if np.isfinite(s["val_bpb"])]
    ax.plot(ks, vs, "o-" if "check" in row["variant"] else "x--", ms=3, lw=1, label=row["variant"])
ax.set_ylim(top=min(3.2, ax.get_ylim()[1]))
ax.set_xlabel("longest context length k (tokens)")
ax.set_ylabel("val_bpb of P_k alone")
ax.set_title(f"{P.name}: the n-gram model alone against its longest context")
ax.legend(fontsize=6, ncol=2)
save_figure(fig, figures / f"06_orders_{P.name}.png")
fig

# %%
display(Markdown(report.markdown_table(
    [{"variant": r["variant"], "best": r["best_val_bpb"], "at": r["best_order"],
      "k16": r["scores"][-1]["val_bpb"], "false": r["false_hits"]["false_hit_rate"], "mib": r["table_mib"]}
     for r in orders["rows"]],
    {"variant": "tables", "best": "best val_bpb", "at": "at k", "k16": f"at k = {orders['orders'][-1]}",
     "false": "false-hit rate", "mib": "MiB"}, {"at": "d", "false": ".2%", "mib": ".0f"})))

# %% [markdown]
# What the curves say, row by row (the numbers are the record's above):
#
# - **False hits are what made long contexts useless.** Without check bits both discounting smoothings get
#   *worse* once the context is a few tokens long (Witten-Bell is infinite from short contexts on, see below):
#   most unseen long contexts read another context's counts. With check bits the same tables improve all the way
#   to the longest context. This is why the learned mixture of `ngram` gives the long contexts little weight.
# - **Witten-Bell can give zero probability here** (the infinite points are left out of the plot). Its $T$, the
#   number of distinct continuations, comes from a hashed set of seen (context, token) pairs that under-counts
#   when two pairs share a bit; a context whose every continuation collided has $T = 0$, hence no escape, hence
#   probability 0 for every token outside its slots. Inside the learned mixture every length keeps a positive
#   weight, so `ngram` never scored an infinite loss, but the estimate is skewed. Absolute discounting does not
#   read $T$ at all, which is one reason it wins. (We left Witten-Bell as it is: changing it changes every
#   recorded `ngram` run, and the recipe that supersedes it does not use it.)
# - **All of the text did not help.** The issue behind this chapter expected tables counted from the whole
#   training split to beat the average of two folds' tables, each from half of it. Measured, the whole split's
#   tables score worse, even with twice the buckets (the memory of two folds), and even at context length 1,
#   where nothing is hashed. Averaging two models counted from different halves is itself a smoothing; a single
#   table set keeps the same number of slots for twice the counts. So evaluation keeps the folds' average.
# - **More continuations per context help most**: 256 per token instead of 32, and 8 per hashed context instead
#   of 4. A full bigram table (1,024 per token) adds almost nothing over 256, and 16 per hashed context is a small
#   further gain for twice the memory. `ngram-tables` takes check bits, modified absolute discounting, 256 and 8.

# %% [markdown]
# ## The n-gram model alone, mixed: global weights or per context
#
# `ngram-only`, `ngram-only-tables` and `ngram-only-ctx` learn only the mixing (no network) for a short charged
# budget each (printed below), the counting included, the profile's seeds each.

# %%
budget_alone = min(P.budget_s, 30.0)
alone = {name: ex.seeds(name, P, root=run_root, budget_s=budget_alone, log=log)
         for name in ("ngram-only", "ngram-only-tables", "ngram-only-ctx")}
g_alone, d_alone = compare([r for rs in alone.values() for r in rs], paired=True)
print(f"{budget_alone:g} charged s each: " + "; ".join(f"{k} {report.bpb_group(rs)}" for k, rs in alone.items()))
print(format_comparison(g_alone, d_alone))
g_actx, d_actx = compare(alone["ngram-only-tables"] + alone["ngram-only-ctx"], paired=True)
print(format_comparison(g_actx, d_actx))

# %% [markdown]
# ## The gain at equal budget, with the network
#
# The previous best recipe (`bigram`, chapter 4's runs), the first mix (`ngram`), the better tables
# (`ngram-tables`) and the per-context mixing (`ngram-ctx`), each at the full budget, the profile's seeds, paired
# by seed.

# %%
better = ex.seeds("ngram-tables", P, root=run_root, log=log)  # `before` (bigram) and `shards` (ngram): the box's
ctx = ex.seeds("ngram-ctx", P, root=run_root, log=log)
for recs in (before, shards, better, ctx):
    print(f"{recs[0]['recipe']}: val_bpb {report.bpb_group(recs)}")
groups, diffs = compare(before + shards + better + ctx, paired=True)
print(format_comparison(groups, diffs))
g_net, d_net = compare(shards + better, paired=True)
print(format_comparison(g_net, d_net))
g_ctx, d_ctx = compare(better + ctx, paired=True)
print(format_comparison(g_ctx, d_ctx))
fig, ax = new_figure(6.4, 3.4)
for i, g in enumerate(groups):
    ax.scatter([i] * g.n, g.values, s=14)
    ax.errorbar([i + 0.15], [g.mean], yerr=[g.std if g.n > 1 else 0], fmt="k_", capsize=3)
ax.set_xticks(range(len(groups)), [f"{recs[0]['recipe']}\n{steps_span([r['steps'] for r in recs])}"
                               for recs in (before, shards, better, ctx)], fontsize=8)
ax.set_ylabel("val_bpb")
ax.set_title(f"{P.name}: the mix at equal budget ({P.budget_s:g} charged s)\neach seed and mean ± std", fontsize=9)
save_figure(fig, figures / f"06_gain_{P.name}.png")
fig

# %%
# the n-gram rung's runs against the rung below, against steps and against charged reference seconds
fig, (ax_s, ax_t) = new_figure(10.4, 3.8, ncols=2)
seed_list = sorted({r["seed"] for r in before})
for ax, x in ((ax_s, "step"), (ax_t, "charged_s")):
    loss_curve_figure(before + shards, x=x, smooth=5, ax=ax)
    for line, r in zip(ax.lines, before + shards):
        line.set_color("C0" if r["recipe"] == "bigram" else "C1")
        line.set_linestyle(["-", "--", ":"][seed_list.index(r["seed"]) % 3])
    ax.legend(fontsize=7, ncols=2)
ax_s.set_xlabel("step")
ax_t.set_xlabel("charged seconds (reference clock)")
ax_s.set_title(f"{P.name}: train loss against steps", fontsize=10)
ax_t.set_title(f"{P.name}: against charged reference seconds", fontsize=10)
save_figure(fig, figures / f"06_loss_{P.name}.png")
fig

# %%
codes = {name: sorted({report.short_code(r.get("code")) for r in recs})
         for name, recs in (("bigram", before), ("ngram", shards), ("ngram-tables", better), ("ngram-ctx", ctx))}
one_sitting = len({tuple(c) for c in codes.values()}) == 1
display(Markdown(
    "**Reading the gain.** Against `bigram`, at equal budget and paired by seed: "
    + "; ".join(f"`{d.b.split()[0]}` {d.delta:+.4f} bpb ({d.verdict})" for d in diffs)
    + f". The better tables against the first mix: {d_net[0].delta:+.4f} ({d_net[0].verdict}); per-context mixing "
    f"against global weights on the better tables: {d_ctx[0].delta:+.4f} ({d_ctx[0].verdict}). The groups were "
    + ("trained by one code version (" + ", ".join(codes["ngram"]) + ")." if one_sitting else
       "trained by different code versions (" + "; ".join(f"`{k}` {', '.join(v)}" for k, v in codes.items())
       + "): not one interleaved sitting, so a difference between them also carries the machine's drift between "
         "sessions (the step counts are in the table above).")
    + " The competition's recipes keep the first mix's tables (`ngram`); the better tables are the n-gram model's "
      "own best, and the adaptive comparison's below. What this chapter did not measure: whether the mixture, "
      "learning fastest while the network is still weak, fits the counts alone and keeps that fit (a later start, "
      "a lower rate or a refit of the mixture at the end would tell), and the counts that check bits drop (the miss "
      "rate printed above)."
))

# %% [markdown]
# ## What the mixing learned
#
# The global weights over context lengths after training (seed 0) of `ngram` and `ngram-tables`, and the learned
# scale on the bias (one seed each).

# %%
fig, axes = new_figure(8.0, 3.2, ncols=2)
for ax, rec in zip(axes, [shards[0], better[0]]):
    mix = rec["ngram"]
    ax.bar(range(len(mix["mixture"])), mix["mixture"])
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("mixture weight")
    ax.set_title(f"{rec['recipe']}: scale {mix['scale']:.2f} (one seed: seed 0)", fontsize=9)
save_figure(fig, figures / f"06_mixture_{P.name}.png")
fig

# %%
weights = {rec["recipe"]: rec["ngram"]["mixture"] for rec in (shards[0], better[0])}
display(Markdown(
    "Where the weight went (seed 0): " + "; ".join(
        f"`{k}` {w[0]:.0%} on context length 0 and {sum(w[-4:]):.0%} on the four longest ({len(w) - 4}-{len(w) - 1})"
        for k, w in weights.items())
    + ". A mix whose weight sits at length 0 adds a bias close to $\\log P_0$ with mild corrections; one whose "
      "weight sits on the longest contexts adds their whole back-off chain, peaked at a context's few "
      "continuations, and where such a bias is wrong the network's softcapped logits cannot overrule it."
))

# %% [markdown]
# ## Where the counts win and where the network wins
#
# One validation passage (the first evaluation window), scored by `ngram-ctx` (seed 0) as evaluation scores it,
# and by the same network with the bias left out (`explain_positions`). Each bar is one token: how many bits the
# network loses there when its counts are taken away (positive) or gains (negative), coloured by the mixture's
# expected context length at that position, the per-context weighting at work.
#
# Taking the counts away from a network trained with them measures how much that network *depends* on them, which is
# not what they are *worth*; the text after the figure gives both, computed.

# %%
model, mcfg = load_run_model(ex.run("ngram-ctx", P, seed=0, root=run_root, need_checkpoint=True, log=log)["run_dir"])
w = next(eval_windows(data.val_tokens(), P.seq_len, 1))
why = {k: v[0] for k, v in explain_positions(model, w.inputs, w.targets).items()}
n_show = min(160, P.seq_len)
fig, ax = new_figure(9.0, 3.6)
shade = ScalarMappable(Normalize(0, mcfg.model.ngram.max_order), matplotlib.colormaps["viridis"])
ax.bar(range(n_show), why["gain_bits"][:n_show].numpy(), width=0.9,
       color=shade.to_rgba(why["context_length"][:n_show].clamp(0, mcfg.model.ngram.max_order).numpy()))
fig.colorbar(shade, ax=ax, label="expected context\nlength (tokens)", pad=0.01)
ax.axhline(0, color="grey", lw=0.8)
ax.set_xlabel("position in the passage")
ax.set_ylabel("bits lost without the counts")
ax.set_title(f"{P.name}: ngram-ctx (seed 0) on a validation passage, its counts taken away: how much a network "
             f"trained with them\ndepends on them (not what they are worth: that is the gain over `bigram`, "
             f"trained without them)", fontsize=9)
save_figure(fig, figures / f"06_passage_{P.name}.png")
fig

# %%
tok = data.tokenizer
pieces = [tok.decode([int(v)]) for v in w.targets[0]]
order = torch.argsort(why["gain_bits"])
show = lambda i: (f"`{''.join(pieces[max(0, i - 6):i]).strip()[-30:]!s}` -> `{pieces[i]!s}`: "
                  f"{why['gain_bits'][i]:+.2f} bits, context {why['context_length'][i]:.1f}, "
                  f"known lengths {why['known'][i]:.0f}")
display(Markdown("Where the counts won most:\n\n" + "\n".join(f"- {show(int(i))}" for i in order.flip(0)[:5])
                 + "\n\nWhere they cost most:\n\n" + "\n".join(f"- {show(int(i))}" for i in order[:5])))
worth = next(d for d in diffs if d.b.startswith("ngram-ctx"))  # against `bigram`, trained without the counts
bytes_per_token = data.val_bytes / data.manifest["val"]["tokens"]
dependence, worth_token = why["gain_bits"].mean().item(), -worth.delta * bytes_per_token
display(Markdown(
    f"**Which it is.** Taken away from `ngram-ctx` (seed 0, {report.bpb(ctx[0])}), which trained with them, the "
    f"counts cost {why['gain_bits'].sum():+.1f} bits over the passage's {len(pieces)} tokens ({dependence:+.2f} bits a "
    f"token; they help at {(why['gain_bits'] > 0).float().mean():.0%} of the positions). That number is how much a "
    f"network trained with the bias **depends** on it: it learned alongside the bias and left to it what the counts "
    f"predict, so without the bias it lacks what it never learned. What the bias is **worth** is the gain over a "
    f"network trained without it at the same budget: `{worth.b.split()[0]}` - `{worth.a.split()[0]}` = "
    f"{worth.delta:+.4f} bpb (mean of {worth.pairs} seeds paired, {worth.verdict}), about {worth_token:+.2f} bits a "
    f"token ({bytes_per_token:.2f} validation bytes a token)"
    + (f", {dependence / worth_token:.0f} times less than the dependence." if worth_token > 0 else ".")
    + " The figure shows *where* the trained network leans on its counts, not by how much they improve it."
))

# %% [markdown]
# ## The n-gram model against the compressors, on equal terms
#
# PPMd and xz read the validation text as they encode it: every byte they score, they have also learned from.
# The competition's score forbids that: nothing is ever counted from validation tokens. **Adaptive evaluation**
# (`frontier eval --adaptive`, `val_bpb_adaptive`) does what a compressor does, and only here: it scores each
# validation window first, then counts its tokens into the tables evaluation reads, so each window sees the counts
# of every window before it (the tables are put back afterwards). It is a comparison with the compressors, never
# the competition's score.

# %%
device = select_device("cpu")
adaptive_batch = 1 if P.name != "smoke" else P.eval_batch_size  # window by window; smoke only checks it runs
adaptive = []
scored = ["ngram-only", "ngram-only-tables", "ngram-only-ctx", "ngram-tables", "ngram-ctx"]
for name in scored if P.name != "smoke" else ["ngram-only-ctx", "ngram-ctx"]:  # smoke: two, window by window is slow
    rec = ex.run(name, P, seed=0, root=run_root, need_checkpoint=True, log=log,
                 budget_s=budget_alone if name.startswith("ngram-only") else None)
    score = evaluate_run(rec["run_dir"], data, device, log=lambda *a: None, adaptive=True,
                         adaptive_batch=adaptive_batch)
    adaptive.append({"model": f"{name} (seed 0, {rec['steps']:,} steps)", "val_bpb": score["val_bpb"],
                     "val_bpb_adaptive": score["val_bpb_adaptive"]})
comp = compressor_bpb(data)
rows = adaptive + [{"model": c["compressor"], "val_bpb": None, "val_bpb_adaptive": c["val_bpb"]} for c in comp]
display(Markdown(report.markdown_table(sorted(rows, key=lambda r: r["val_bpb_adaptive"]),
                                       {"model": "model", "val_bpb": "val_bpb (the competition's)",
                                        "val_bpb_adaptive": "adaptive (counts the text it has scored)"})))

# %% [markdown]
# ## How the gain changes with the budget
#
# One seed each at shorter budgets (the full budget uses the seeds above), for the first mix. Public reports
# found the mix worth more on weak or short runs than on strong ones; does a shorter budget here lean on the
# counts more?

# %%
scan = []
for frac in (0.25, 0.5) if P.name != "smoke" else (0.5,):
    b = P.budget_s * frac
    r0 = ex.run("bigram", P, seed=0, root=run_root, budget_s=b, label=f"bigram-{b:g}s", log=log)
    r1 = ex.run("ngram", P, seed=0, root=run_root, budget_s=b, label=f"ngram-{b:g}s", log=log)
    scan.append({"budget_s": b, "bigram": report.bpb(r0), "ngram": report.bpb(r1),
                 "gain": r0["val_bpb"] - r1["val_bpb"]})
scan.append({"budget_s": P.budget_s, "bigram": report.bpb_group(before), "ngram": report.bpb_group(shards),
             "gain": groups[0].mean - groups[1].mean})
display(Markdown(report.markdown_table(scan, {"budget_s": "budget s", "bigram": "bigram", "ngram": "ngram",
                                              "gain": "gain (bigram - ngram)"}, {"budget_s": ".0f"})))
fig, ax = new_figure(6.0, 3.4)
ax.plot([s["budget_s"] for s in scan], [s["gain"] for s in scan], "o-")
ax.axhline(0, color="grey", lw=0.8)
ax.set_xlabel("charged budget (s)")
ax.set_ylabel("val_bpb gain from the mix")
ax.set_title(f"{P.name}: the n-gram gain against the budget\n(shorter budgets: one seed each; the full budget: mean of {len(shards)})", fontsize=10)
save_figure(fig, figures / f"06_gain_vs_budget_{P.name}.png")
fig

# %% [markdown]
# The shorter budgets have one seed each, while the seed-to-seed spread at the full budget is printed above; a
# shape that rests on single runs is a hint for the next experiment, not a finding.

# %% [markdown]
# ## What this chapter measured

# %%
best_comp = min(comp, key=lambda c: c["val_bpb"])
ad = {r["model"].split(" ")[0]: r["val_bpb_adaptive"] for r in adaptive}
display(Markdown(
    f"- val_bpb at {P.budget_s:g} charged seconds (mean ± std over seeds, paired by seed against `bigram`): "
    + "; ".join(f"`{recs[0]['recipe']}` {report.bpb_group(recs)}" for recs in (before, shards, better, ctx)) + ". "
    + "; ".join(f"`{d.b.split()[0]}` - `{d.a.split()[0]}` {d.delta:+.4f} ({d.verdict})" for d in diffs) + ".\n"
    f"- Better tables against the first mix: {d_net[0].delta:+.4f} ({d_net[0].verdict}); per-context mixing "
    f"against global weights on the better tables: {d_ctx[0].delta:+.4f} ({d_ctx[0].verdict}).\n"
    f"- The n-gram model alone ({budget_alone:g} charged s): "
    + "; ".join(f"`{k}` {report.bpb_group(rs)}" for k, rs in alone.items())
    + f"; per-context mixing against global weights: {d_actx[0].delta:+.4f} ({d_actx[0].verdict}).\n"
    f"- Adaptive evaluation (not the competition's score): "
    + "; ".join(f"`{k}` {v:.4f}" for k, v in ad.items())
    + f"; best compressor {best_comp['compressor']} {best_comp['val_bpb']:.4f} on the same split.\n"
    f"- False hits on the validation split: `ngram` tables {false_hits['ngram-only']['false_hit_rate']:.2%}, "
    f"`ngram-tables` {false_hits['ngram-only-tables']['false_hit_rate']:.2%}.\n"
    f"- Counting shards vs streaming (first mix): streaming - shards = {d_count[0].delta:+.4f} ({d_count[0].verdict}); "
    f"without cross-fitting (counts read in-sample): {report.bpb(insample)}.\n"
    f"- Cost: the bias takes " + ", ".join(f"{100 * v:.1f}% (`{k}`)" for k, v in overhead.items())
    + f" of step time; counting runs at {count_rate:,.0f} tokens/s; tables "
    + ", ".join(f"{t.table_mib():.0f} MiB (`{k}`)" for k, t in tables.items()) + "."
))

# %% [markdown]
# ## Appendix: where the numbers come from
#
# The rule the verdicts follow, the ladder and sweep records the box reads, the run records (folders, the code that
# trained each, and the code that reproduced a reused one), the bench records, and what the experiments said about
# each run as the chapter ran.

# %%
print(RULE)
print()
print(f"box: the n-gram rung from {ladder_from}; the leave-one-out from "
      + (f"`{repo_path(sweep['path'])}` (code {report.short_code(sweep.get('code'))})" if sweep else "no sweep record"))
if tuned is not None:
    print(f"the mix at equal steps on `{tuned['base']}`: `{repo_path(tuned['path'])}` "
          f"(code {report.short_code(tuned.get('code'))})")
if ladder_rec is not None:
    print(f"ladder record code {report.short_code(ladder_rec.get('code'))}; its `ngram` runs {', '.join(rung['runs'])}; "
          f"its `bigram` runs {', '.join(below['runs'])}")
print(f"this chapter's `ngram` runs: {', '.join(repo_path(r.get('run_dir', '')) for r in shards)}; `bigram`: "
      f"{', '.join(repo_path(r.get('run_dir', '')) for r in before)}")
chapter_runs = shards + stream + before + better + ctx + [insample] + [r for rs in alone.values() for r in rs]
display(Markdown(report.runs_table(chapter_runs)))
print("runs:\n" + report.provenance(chapter_runs))
for name, rec in (("step bench", bench), ("counting bench", counting), ("order curve", orders)):
    print(f"{name} record {rec['path']} (code {report.short_code(rec['code'])})")
print("\n".join(log_lines))
