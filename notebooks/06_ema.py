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
# # Chapter 6: weight averaging, judged against the noise
#
# The write-up's fourth gain was tuning an exponential moving average (EMA) of the weights, scored in place of the
# live weights, and its lesson was noise: differences under about 0.0005 bits per byte were run twice before they
# were believed. This chapter asks what the average computes, where the noise between runs comes from on this
# ground, how many seeds a claim of a given size needs, and whether the average helps here: at equal steps, and at
# the budget it costs.
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
# ## What the average is
#
# `frontier.train.ema.WeightEMA` keeps an fp32 shadow of every trained weight (the network, the bigram table, the
# n-gram mixture's weights; not the n-gram count tables, which are counts). The trainer calls `update(frac, step)`
# after the optimisers, inside the charged step, with the elapsed fraction of the run. Four constants
# (`EMA_*` in `frontier/recipes.py`) set it:
#
# - **start** (`start_frac`): the first update at or after this fraction of the run copies the live weights; before
#   it there is no average.
# - **half-life** (`half_life_frac`): a later update, the fraction having moved by `d` since the last one, does
#   `shadow = decay * shadow + (1 - decay) * live` with `decay = 0.5 ** (d / half_life_frac)`. The half-life is a
#   share of the run, so it means the same stretch of training at any number of steps.
# - **every**: an update on every `every`-th step.
# - **mix**: what is scored is `mix * shadow + (1 - mix) * live` (`averaged()`): the live weights pulled part of the
#   way towards the average.
#
# Two small tensors whose live values climb by one a step, averaged over a 40-step run, against the formula by hand:

# %%
import torch
import torch.nn as nn

from frontier.recipes import resolve
from frontier.study.report import markdown_table
from frontier.train.ema import WeightEMA
from IPython.display import Markdown, display

E = resolve("ema", ch.profile).train.ema  # the recipe's constants
print(E)

toy = nn.Module()
toy.a = nn.Parameter(torch.zeros(2))
toy.b = nn.Parameter(torch.zeros(2, 2))
avg = WeightEMA(toy, E)
n_steps, hand, last, rows = 40, None, None, []
for step in range(1, n_steps + 1):
    frac = (step - 1) / n_steps  # the elapsed fraction a run of n_steps steps gives its step
    with torch.no_grad():
        toy.a.fill_(float(step))  # the live weights at this step: a ramp
        toy.b.fill_(-float(step))
    if avg.update(frac, step):
        if hand is None:
            hand = float(step)  # the first update copies
        else:
            decay = 0.5 ** ((frac - last) / E.half_life_frac)
            hand = decay * hand + (1 - decay) * float(step)
        last = frac
    if hand is not None and (step <= 24 or step == n_steps):
        mixed = avg.averaged()
        rows.append({"step": step, "frac": f"{frac:.3f}", "live": float(toy.a.detach()[0]),
                     "shadow": float(avg.shadow[0][0]), "hand": hand, "scored": float(mixed[0][0]),
                     "scored_hand": E.mix * hand + (1 - E.mix) * step, "b": float(mixed[1][0, 0])})
        assert abs(rows[-1]["shadow"] - hand) < 1e-4 and abs(rows[-1]["scored"] - rows[-1]["scored_hand"]) < 1e-4
display(Markdown(markdown_table(rows, {"step": "step", "frac": "elapsed fraction", "live": "live a[0]",
                                       "shadow": "shadow a[0]", "hand": "by hand", "scored": "scored a[0] (mix)",
                                       "scored_hand": "mix by hand", "b": "scored b[0,0]"}, {"live": ".1f"})))
print(f"first update at step {avg.first_step} (fraction {E.start_frac:g}); {avg.updates} updates; "
      f"the package and the hand formula agree to 1e-4 at every row")

# %% [markdown]
# On a ramp the shadow trails the live weights by `decay / (1 - decay)` steps, and the scored mix by `mix` times
# that. How many steps that is depends on the run's length, through the half-life's share of the run (here for
# runs limited to a number of steps, whose elapsed fraction is `(step - 1) / steps`):

# %%
import math

from frontier.recipes import resolve

E = resolve("ema", ch.profile).train.ema
for steps in (40, 400, 1000):
    decay = 0.5 ** (1 / steps / E.half_life_frac)
    trail = decay / (1 - decay)
    first = math.ceil(E.start_frac * steps) + 1
    print(f"{steps:,} steps: decay {decay:.4f} a step; the average starts at step {first:,} and trails the live "
          f"weights by {trail:.1f} steps, the scored mix by {E.mix * trail:.1f}")

# %% [markdown]
# ## Where the noise comes from
#
# Two sources are left once a budget is bought as steps before the run (the steps rule: the same recipe, seed and
# budget train the same steps on any machine). **The same seed and steps** trains the same computation again.
# **Another seed** gives other initial weights and another order of the training batches. First the same seed
# twice, 30 steps of `ngram` each:

# %%
a, b = (ch.run("ngram", 0, steps=30, label=f"noise-30steps-{k}") for k in "ab")
la, lb = a["curve"]["train_loss"], b["curve"]["train_loss"]
rel = max(abs(x - y) / abs(x) for x, y in zip(la, lb))
print(f"seed 0, 30 steps, twice: val_bpb {a['val_bpb']:.10f} and {b['val_bpb']:.10f} (difference "
      f"{b['val_bpb'] - a['val_bpb']:+.1e}); {sum(x != y for x, y in zip(la, lb))} of the {len(la)} logged training "
      f"losses differ, by at most {rel:.1e} relative")

# %% [markdown]
# The line above says how close the two runs came. A compiled model (`ngram` is one) need not repeat to the last
# bit on a CPU: Inductor's generated code may sum in another order after another compilation, where an eager model
# repeats bit for bit. A difference of float32's rounding (about 1e-7 relative) would still be millions of times
# smaller than any difference this book judges.

# %% [markdown]
# Then the seeds: the ladder's `ngram` (the n-gram mix the final is built on) and `baseline` runs at the profile's budget, five seeds
# each. A comparison between two recipes has to clear this spread.

# %%
from frontier.figures import new_figure
from frontier.study.report import bpb_group, markdown_table, mean_std
from IPython.display import Markdown, display

n = ch.profile.seeds
twice = [ch.run("ngram", 0, steps=30, label=f"noise-30steps-{k}") for k in "ab"]
groups = {"ngram": ch.seeds("ngram", n), "baseline": ch.seeds("baseline", n)}
rows = []
for name, recs in groups.items():
    val = [r["val_bpb"] for r in recs]
    test = [r.get("test_bpb") for r in recs]
    rows.append({"recipe": f"`{name}`", "val": bpb_group(recs), "range": max(val) - min(val),
                 "test": "no test split" if None in test else "{:.4f} ± {:.4f}".format(*mean_std(test)[:2])})
display(Markdown(markdown_table(rows, {"recipe": "recipe", "val": "val_bpb (mean ± std, seeds, steps)",
                                       "range": "val range", "test": "test_bpb (mean ± std)"})))

fig, axes = new_figure(10.5, 3.4, ncols=3)
panels = [("seed 0 twice, 30 steps", twice, ["run a", "run b"])] + [
    (f"{name}, {len(recs)} seeds, {recs[0]['steps']} steps", recs, [f"s{r['seed']}" for r in recs])
    for name, recs in groups.items()]
seed_range = max(r["val_bpb"] for r in groups["ngram"]) - min(r["val_bpb"] for r in groups["ngram"])
for i, (ax, (title, recs, ticks)) in enumerate(zip(axes, panels)):
    val = [r["val_bpb"] for r in recs]
    ax.plot(range(len(val)), val, "o", color="C0")
    spread = max(val) - min(val)
    if i == 0:  # the same seed twice: drawn at the scale of ngram's seeds, so a rounding does not fill the panel
        middle, half = (max(val) + min(val)) / 2, 0.6 * max(seed_range, 1e-4)
        ax.set_ylim(middle - half, middle + half)
        title += " (at the\nscale of the ngram panel)"
    ax.ticklabel_format(axis="y", useOffset=False)
    ax.set_xticks(range(len(val)), ticks)
    ax.set_xlim(-0.5, len(val) - 0.5)
    ax.set_title(f"{title}\nrange {spread:.1e}" if spread and spread < 1e-4 else f"{title}\nrange {spread:.4f}",
                 fontsize=9)
    ax.grid(alpha=0.3)
axes[0].set_ylabel("val_bpb (each dot one run;\neach panel its own axis)")
ch.figure(fig, "06_noise")

# %% [markdown]
# In the committed runs (`runs/cpu/docstrings/ngram/`, `runs/cpu/docstrings/baseline/`) the baseline's seeds spread
# about four times as widely as `ngram`'s (std 0.0149 against 0.0036 on validation): the n-gram tables are counted
# from the same training text whatever the seed, and they hold the score steady. What differs between two runs is
# then the seed, and a comparison paired by seed gives both arms the same one.

# %% [markdown]
# ## How many seeds a claim needs
#
# `frontier.study.compare.repeats_needed(delta, sd, alpha, power, paired)` gives the fewest seeds with which a
# two-sided t-test at level `alpha` detects a true difference `delta` with probability `power` (0.8 here). The rule
# (`frontier.study.compare.RULE`) keeps a change at p < 0.01 over at least 5 seeds, so `alpha` is 0.01.
# **Unpaired** (Welch), two groups of runs: `sd` is a group's seed-to-seed spread. **Paired** by seed: `sd` is the
# spread of the per-seed differences, where the seed's own luck cancels.

# %%
from frontier.study.compare import KEEP_ALPHA, repeats_needed
from frontier.study.report import markdown_table, mean_std
from IPython.display import Markdown, display

n = ch.profile.seeds
steps = 400 if ch.profile.name == "cpu" else 10
ngram, baseline, ema = (ch.seeds(r, n) for r in ("ngram", "baseline", "ema"))
at_steps = [ch.run("ema", s, steps=steps, label=f"ema-{steps}steps") for s in range(n)]
spreads = {
    "welch_ngram": (mean_std(r["val_bpb"] for r in ngram)[1], False),
    "welch_baseline": (mean_std(r["val_bpb"] for r in baseline)[1], False),
    "paired_budget": (mean_std(e["val_bpb"] - g["val_bpb"] for e, g in zip(ema, ngram))[1], True),
    "paired_within": (mean_std(r["val_bpb_live"] - r["val_bpb"] for r in at_steps)[1], True),
}
print("seed-to-seed std: `ngram` {:.5f}, `baseline` {:.5f}; std of the per-seed differences: `ema` - `ngram` {:.5f}, "
      "live - mix {:.5f}".format(*(sd for sd, _ in spreads.values())))
need = [{"delta": d, **{k: repeats_needed(d, sd, alpha=KEEP_ALPHA, paired=paired) if sd == sd and sd > 0 else None
                        for k, (sd, paired) in spreads.items()}} for d in (0.01, 0.005, 0.002, 0.0005)]
display(Markdown(markdown_table(need, {
    "delta": "difference to detect",
    "welch_ngram": "unpaired: `ngram`'s seed spread (seeds per group)",
    "welch_baseline": "unpaired: `baseline`'s seed spread (seeds per group)",
    "paired_budget": "paired: `ema` against `ngram`, same seeds (pairs)",
    "paired_within": f"paired: live against averaged weights, same runs, {steps} steps (pairs)"},
    {"delta": ".4f"})))

# %% [markdown]
# Unpaired, a difference of 0.002 between two recipes at `ngram`'s spread needs dozens of seeds a group, and at the
# baseline's more than a thousand; paired by seed, three or four pairs reach it, and the gap the write-up ran twice
# (0.0005) becomes a claim that six to fifteen pairs can make. This is why every comparison in the book pairs by
# seed, and why a change is judged at equal steps first: the fewer things differ between the two arms, the
# smaller the spread of their difference.

# %% [markdown]
# ## The average at equal steps
#
# An `ema` run is `ngram` with the average: the shadow never touches the live weights, so the same run scores its
# live weights (`val_bpb_live`, which are `ngram`'s trajectory at that step) beside the declared mix (`val_bpb`).
# That pair differs by the average alone. Five seeds at 400 steps, the runs of `ema`'s leave-one-out (the ladder's
# evidence at equal steps in chapter 07):

# %%
from frontier.study.compare import Group, judge, p_text, paired_test
from frontier.study.report import markdown_table, mean_std
from IPython.display import Markdown, display

n = ch.profile.seeds
steps = 400 if ch.profile.name == "cpu" else 10
runs = [ch.run("ema", s, steps=steps, label=f"ema-{steps}steps") for s in range(n)]
display(Markdown(markdown_table(
    [{"seed": r["seed"], "steps": r["steps"], "live": r["val_bpb_live"], "mix": r["val_bpb"], "alone": r["val_bpb_ema"],
      "gain": r["val_bpb_live"] - r["val_bpb"], "test": r.get("test_bpb")} for r in runs],
    {"seed": "seed", "steps": "steps", "live": "live weights", "mix": "scored mix (val_bpb)", "alone": "average alone",
     "gain": "live - mix (positive: the average helps)", "test": "test_bpb (the mix)"})))
live = Group("live", tuple(r["val_bpb_live"] for r in runs), (), tuple(r["seed"] for r in runs))
mix = Group("mix", tuple(r["val_bpb"] for r in runs), (), tuple(r["seed"] for r in runs))
d = paired_test(live, mix)
print(f"the average at {steps} steps, {n} seeds, paired: gain {-d.delta:+.4f} (sd of the differences "
      f"{d.diff_std:.4f}), {p_text(d.p)}: {judge(-d.delta, d.p, n)}")
test = [r.get("test_bpb") for r in runs]
if None not in test:
    print("test_bpb of the mix: {:.4f} ± {:.4f}; the runs score test for the weights they declare only, so the live "
          "weights have no test score to pair with".format(*mean_std(test)[:2]))

# %% [markdown]
# On validation the mix scores about 0.0006 worse than the live weights it is made from (p = 0.049 in the committed
# runs, `runs/cpu/docstrings/ema-400steps/`): not better, and short of the rule's p < 0.01, so **not shown**. One
# reading: at 400 steps the average starts at step 201 and trails the live weights by about 28 steps while the
# loss is still falling, so it mixes in the weights of earlier, worse steps.

# %% [markdown]
# ## The average at equal budget
#
# The average's update runs inside every charged step, so a step of `ema` does a little more work than one of
# `ngram`; the budget buys each the steps its committed cost prices (`frontier/train/costs.json`). Five seeds each
# at the profile's budget, paired by seed:

# %%
from frontier.study.compare import Group, keep, p_text, paired_test

n = ch.profile.seeds
steps = 400 if ch.profile.name == "cpu" else 10
ngram, ema = ch.seeds("ngram", n), ch.seeds("ema", n)
within = [ch.run("ema", s, steps=steps, label=f"ema-{steps}steps") for s in range(n)]


def group(name, recs, score="val_bpb"):
    return Group(name, tuple(r[score] for r in recs), (), tuple(r["seed"] for r in recs))


at_budget = paired_test(group("ngram", ngram), group("ema", ema))
at_steps = paired_test(group("live", within, "val_bpb_live"), group("mix", within))
for name, recs in (("ngram", ngram), ("ema", ema)):
    print(f"`{name}`: {recs[0]['steps']} steps, val_bpb " + ", ".join(f"{r['val_bpb']:.4f}" for r in recs)
          + (", test_bpb " + ", ".join(f"{r['test_bpb']:.4f}" for r in recs) if recs[0].get("test_bpb") else ""))
print(f"`ema` over `ngram` at equal budget ({ema[0]['steps']} against {ngram[0]['steps']} steps, {n} seeds, paired): "
      f"{-at_budget.delta:+.4f}, {p_text(at_budget.p)}")
if ngram[0].get("test_bpb") is not None:
    t = paired_test(group("ngram", ngram, "test_bpb"), group("ema", ema, "test_bpb"))
    print(f"on test (reported, never chosen on): {-t.delta:+.4f}, {p_text(t.p)}")
kept, why = keep((-at_steps.delta, at_steps.p, n), (-at_budget.delta, at_budget.p, n))
print(f"by the rule: {'kept' if kept else 'dropped' if kept is False else 'not shown'}: {why}")

# %% [markdown]
# At the budget `ema` is 0.0016 better than `ngram` on validation (380 against 375 steps, p < 0.001, the committed
# runs). The committed cost table prices `ema`'s step and counting a little below `ngram`'s (0.7% and 4%, inside
# the cost bench's spread: the average adds work to a step), and those five steps are the gain. It was not better
# at equal steps, so the rule does not show it, and the weight average left the final recipe, which is built on
# `ngram` instead (`frontier.recipes.FINAL`, chapter 07). Its constants (start 0.5, half-life 0.05 of the run, every step, scored as 0.6 average
# + 0.4 live) were chosen on the earlier ground (the small embedded corpus, a sibling recipe, 400 steps, 3 seeds:
# `runs/cpu/sweeps/sweep-average-400-20261203-070854.json`); the next section screens others at this run length.

# %% [markdown]
# ## Another start and half-life
#
# Those constants come from the earlier ground. At this run length, six other settings, each trained as `ema` at
# 400 steps and scored as the average alone (mix 1.0): the record of such a run holds the average's score and its own
# live weights' score, a pair that differs by the average alone (the average never changes training). Two seeds a
# setting screen them on validation; a setting whose average beats its live weights on both seeds would get three
# more seeds and be judged by the rule.

# %%
from frontier.config import EMAConfig
from frontier.recipes import ema_label
from frontier.study.experiments import EMA_SCREEN
from frontier.study.report import markdown_table
from IPython.display import Markdown, display

steps = 400 if ch.profile.name == "cpu" else 10
screen = []
for start, hl in EMA_SCREEN.get(ch.profile.name, EMA_SCREEN["smoke"]):
    e = EMAConfig(start_frac=start, half_life_frac=hl, every=1, mix=1.0)
    recs = [ch.run("ema", s, steps=steps, ema=e, label=f"{ema_label(e)}-{steps}steps") for s in range(2)]
    screen.append({"start": start, "half-life": hl, "steps": recs[0]["steps"],
                   **{f"s{r['seed']}": r["val_bpb_ema"] - r["val_bpb_live"] for r in recs}})
display(Markdown(markdown_table(screen, {"start": "start", "half-life": "half-life", "steps": "steps",
                                         "s0": "average - live, seed 0", "s1": "average - live, seed 1"},
                                 {"start": "g", "half-life": "g", "s0": "+.4f", "s1": "+.4f"})))
best = min(screen, key=lambda row: row["s0"] + row["s1"])
print(f"best on validation: start {best['start']:g}, half-life {best['half-life']:g}: average - live "
      f"{best['s0']:+.4f} and {best['s1']:+.4f} (negative: the average helps)")

# %% [markdown]
# In the committed runs (`runs/cpu/docstrings/ema-start*-400steps/`) every setting's average scores worse than its
# own live weights on both seeds, and the shorter the half-life the closer it comes: the more it is the live
# weights. A later start changes little: by the end of the run the half-life has forgotten what it would add. One
# reading: the learning rate falls linearly to zero over the second half of the run, so the last weights are already
# the quietest of the run, and an average can only add earlier ones, from higher on the loss curve. No setting
# earned the three more seeds; the average stays out of the final recipe.

# %% [markdown]
# ## What this chapter found

# %%
from frontier.config import EMAConfig
from frontier.recipes import ema_label
from frontier.study.chapter import machine
from frontier.study.compare import Group, keep, p_text, paired_test
from frontier.study.experiments import EMA_SCREEN
from frontier.study.report import mean_std

n = ch.profile.seeds
steps = 400 if ch.profile.name == "cpu" else 10
twice = [ch.run("ngram", 0, steps=30, label=f"noise-30steps-{k}") for k in "ab"]
ngram, ema = ch.seeds("ngram", n), ch.seeds("ema", n)
within = [ch.run("ema", s, steps=steps, label=f"ema-{steps}steps") for s in range(n)]


def group(name, recs, score="val_bpb"):
    return Group(name, tuple(r[score] for r in recs), (), tuple(r["seed"] for r in recs))


s = paired_test(group("live", within, "val_bpb_live"), group("mix", within))
b = paired_test(group("ngram", ngram), group("ema", ema))
kept, _ = keep((-s.delta, s.p, n), (-b.delta, b.p, n))
verdict = {True: "kept", False: "dropped", None: "not shown"}[kept]
same = abs(twice[0]["val_bpb"] - twice[1]["val_bpb"])
screen = {}
for start, hl in EMA_SCREEN.get(ch.profile.name, EMA_SCREEN["smoke"]):
    e = EMAConfig(start, hl, 1, 1.0)
    rs = [ch.run("ema", seed, steps=steps, ema=e, label=f"{ema_label(e)}-{steps}steps") for seed in range(2)]
    screen[(start, hl)] = [r["val_bpb_ema"] - r["val_bpb_live"] for r in rs]
(bs, bh), bd = min(screen.items(), key=lambda kv: sum(kv[1]))


def than(gain):
    """A gain in val_bpb (positive: lower, better) in words."""
    return f"{abs(gain):.4f} {'better' if gain > 0 else 'worse'} than"


text = (f"**The weight average: {verdict}** ({n} seeds, {ch.profile.name} profile, {machine()}). At equal steps "
        f"({within[0]['steps']}) its mix scores {than(-s.delta)} the same runs' live weights ({p_text(s.p)}); "
        f"at equal budget `ema` is {than(-b.delta)} `ngram` ({ema[0]['steps']} vs {ngram[0]['steps']} "
        f"steps, {p_text(b.p)}). Of {len(screen)} other starts and half-lives (2 seeds), the best, {bs:g} and "
        f"{bh:g}, scores {than(-bd[0])} its live weights on one seed and {than(-bd[1])} on the other. The same "
        f"seed and steps twice "
        f"differ by {'nothing' if same == 0 else f'{same:.0e}'}, seeds spread `ngram` by "
        f"{mean_std(r['val_bpb'] for r in ngram)[1]:.4f}: claims are paired by seed.")
box.update(text)
print(f"{len(text)} characters")

# %% [markdown]
# ## Records
#
# The runs this chapter quoted, the code that trained each and the code that reproduced it, and the cost table's
# bench record behind their steps.

# %% jupyter={"outputs_hidden": true}
from frontier.config import EMAConfig
from frontier.recipes import ema_label
from frontier.records import REPO
from frontier.study.experiments import EMA_SCREEN
from frontier.study.bench_records import load_bench_record

n = ch.profile.seeds
steps = 400 if ch.profile.name == "cpu" else 10
screened = [EMAConfig(start, hl, 1, 1.0) for start, hl in EMA_SCREEN.get(ch.profile.name, EMA_SCREEN["smoke"])]
recs = ([ch.run("ngram", 0, steps=30, label=f"noise-30steps-{k}") for k in "ab"]
        + ch.seeds("ngram", n) + ch.seeds("baseline", n) + ch.seeds("ema", n)
        + [ch.run("ema", s, steps=steps, label=f"ema-{steps}steps") for s in range(n)]
        + [ch.run("ema", s, steps=steps, ema=e, label=f"{ema_label(e)}-{steps}steps") for e in screened for s in range(2)])
costs = {((r.get("budget") or {}).get("cost") or {}).get("record") for r in recs} - {None}
benches = [load_bench_record(REPO / p) for p in sorted(costs) if (REPO / p).is_file()]
ch.records(recs, benches)
