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
# # Chapter 7: the final model, and where the gains came from
#
# The write-up ends with its final model (14 layers x 512, gated attention, the 2^19-row hashed bigram table, NKI
# kernels, Muon + AdamW, an EMA of the weights and the n-gram mix up to order 16: **0.959** bits per byte from the
# baseline's **1.259** in 30 charged minutes on one Trn2 chip, their numbers). This chapter is our record of the
# same climb: the final recipe's card, the ladder trained interleaved in one sitting, a leave-one-out ablation
# judged at equal steps and at equal budget, the validation split's own uncertainty, a second corpus, and the
# classical compressors. The box below is computed from the records when the chapter runs.

# %% tags=["parameters"]
profile = "cpu"
run_root = "../runs"
figures_dir = "../figures"

# %%
from pathlib import Path

from IPython.display import Markdown, display

from frontier import recipes, records
from frontier.data.dataset import profile_dataset
from frontier.devices import select_device
from frontier.figures import new_figure, save_figure
from frontier.profiles import get_profile
from frontier.recipes import get_recipe, resolve
from frontier.study import ablation, card, ladder, report
from frontier.study import experiments as ex
from frontier.study.bootstrap import bootstrap_bpb, paired_bootstrap_bpb
from frontier.study.compare import RULE, compare
from frontier.study.compressors import compressor_bpb
from frontier.study.sweep import format_sweep, newest_sweep
from frontier.train.trainer import build_model, evaluate_run

P = get_profile(profile)
figures = Path(figures_dir)
data = profile_dataset(P)
log_lines = []  # what the experiments say about reusing or training each run: printed in the appendix
log = log_lines.append
FINAL = get_recipe("final").name
print(ex.code_banner())

# %%
# Everything the chapter quotes, read or measured once here. The ladder: every rung for the profile's seeds at its
# budget (reused where this code reproduces the sitting's records, trained otherwise). The leave-one-out ablation of
# the final recipe at equal steps (trained or reused here) and the equal-budget sweep of the same parts (read: a
# budgeted comparison is only trained in one sitting, runs/PROFILE/sittings/). The final recipe against the
# baseline on a second corpus at the same steps.
STEPS = ablation.EQUAL_STEPS.get(P.name)
results = ladder.run_ladder(P, P.seeds, root=run_root, log=log)
at_steps = ablation.run_ablation("final", P, seeds=range(P.seeds), steps=STEPS, root=run_root, log=log)
at_budget = newest_sweep(run_root, P.name, "ablation-final-budget")
removing = {r["name"].split(" (")[0]: r["name"] for r in at_steps["rows"]}  # "- n-gram mix" -> its row's name
equal_steps = {"bigram": ladder.EqualSteps(at_steps, removing["- bigram table"], removes=True),
               "ngram": ladder.EqualSteps(at_steps, removing["- n-gram mix"], removes=True),
               "ema": ladder.WITHIN_RUNS}
rows = ladder.ladder_rows(results, equal_steps=equal_steps)
parts = ablation.part_rows(at_steps, at_budget)
stdlib = ablation.run_ablation("final", P, seeds=range(P.seeds), steps=STEPS, removes=["all"],
                               corpus="stdlib-source", root=run_root, log=log)
by = {r["rung"]: r for r in rows if "mean" in r}
base, final = by["baseline"], by["final"]
vs_base = next(p for p in parts if p["part"] == "everything")
std_gain = -stdlib["rows"][1]["gain"]
display(Markdown(report.finding_box(
    "the final model",
    f"baseline **{ladder.WRITEUP_TRN2['baseline']}** -> final **{ladder.WRITEUP_TRN2['final']}** bpb (a gain of "
    f"{ladder.WRITEUP_TRN2['baseline'] - ladder.WRITEUP_TRN2['final']:.3f}; the n-gram mix about "
    f"{ladder.WRITEUP_TRN2['ngram_gain']} of it)",
    f"`final` = `{FINAL}`: {ladder.bpb_cell(final)} against the baseline's {ladder.bpb_cell(base)} in "
    f"{P.budget_s:g} reference seconds, a gain of **{final['total']:.4f}**; at equal steps ({vs_base['steps']}) "
    f"{vs_base['gain at equal steps']:+.4f} (p = {vs_base['p (steps)']:.3f}); on the stdlib-source corpus at the "
    f"same steps {std_gain:+.4f} (p = {stdlib['rows'][1]['p']:.3f})",
    "; ".join(f"{p['part']} {'kept' if p['kept'] else 'dropped' if p['kept'] is False else 'undecided'}"
              for p in parts if p["part"] != "everything")
    + " (leave-one-out: each part's gain at equal steps, then at equal budget)",
)))

# %% [markdown]
# ## The final recipe and its record card
#
# A recipe in `frontier/recipes.py` is its parent plus one change, so the final recipe is a path from the
# baseline. `final` and `best` name it (what `make demo` trains). The table sets it beside the write-up's model;
# the record card of its seed-0 run below gives every setting, the parameters, the tokens it read, its speed, the
# command that reproduces it and its log (`frontier card RUN_DIR` prints the same).

# %%
path, r = [], get_recipe("final")
while r is not None:
    path.append(r)
    r = recipes.RECIPES.get(r.parent) if r.parent else None
for r in reversed(path):
    print(f"{r.name:10s} {r.summary}")
cfg = resolve("final", P)
model = build_model(cfg)
m, n = cfg.model, cfg.model.ngram
display(Markdown(report.markdown_table([
    {"part": "blocks", "final here": f"{m.n_layer} x {m.n_embd}, {m.n_head} heads of {m.n_embd // m.n_head}",
     "write-up (Trn2)": "14 x 512"},
    {"part": "attention", "final here": f"RoPE, QK-norm, gated: {m.attn_gate}", "write-up (Trn2)": "RoPE, gated"},
    {"part": "hashed bigram table", "final here": f"{m.bigram.rows:,} rows, sparse update",
     "write-up (Trn2)": f"{2**19:,} rows"},
    {"part": "n-gram mix", "final here": f"contexts up to {n.max_order} tokens, 2^{n.buckets_log2} buckets per length, "
     f"counted from the train shards, {n.folds} folds", "write-up (Trn2)": "up to order 16"},
    {"part": "optimisers", "final here": "Muon (block matrices) + AdamW (the rest)", "write-up (Trn2)": "Muon + AdamW"},
    {"part": "weight average", "final here": (f"EMA from {cfg.train.ema.start_frac:g} of the run, half-life "
     f"{cfg.train.ema.half_life_frac:g} of the run, scored as {cfg.train.ema.mix:g} average + "
     f"{1 - cfg.train.ema.mix:g} live" if cfg.train.ema else "none"), "write-up (Trn2)": "EMA"},
    {"part": "kernels", "final here": f"{cfg.train.kernels} ops (NKI kernels on a NeuronCore)",
     "write-up (Trn2)": "NKI kernels"},
    {"part": "parameters", "final here": f"{model.num_params():,}", "write-up (Trn2)": "-"},
    {"part": "charged budget", "final here": f"{cfg.train.budget_s:g} s on the {cfg.train.clock} clock",
     "write-up (Trn2)": "1,800 s on one Trn2"},
], ["part", "final here", "write-up (Trn2)"])))
display(Markdown(card.record_card(results[FINAL][0])))

# %% [markdown]
# ## The ladder
#
# Every rung is one recipe, trained for seeds 0..n-1 at the profile's budget by `frontier.study.ladder.run_ladder`,
# the seeds interleaved across rungs in one sitting on an otherwise idle machine so that the machine's speed that
# day touches every rung alike (`runs/cpu/sittings/`: the driver and its log). A rung is judged by the project's
# rule, shown here from the package:

# %%
display(Markdown("> " + RULE.replace("\n", "\n> ")))

# %% [markdown]
# A speed rung (torch.compile) is judged by its tokens/s and the steps it buys; a learning rung by its gain over
# the rung below it is built on, paired by seed, at equal steps and at equal budget. The equal-steps gains of the
# bigram table and the n-gram mix come from the leave-one-out ablation below (each part taken out of the final
# recipe at the same step count); the weight average's from inside its own runs (the live weights are the parent's
# trajectory at the same step). The NKI kernels rung changes nothing a CPU can measure (chapter 03).

# %%
display(Markdown(ladder.format_ladder(rows)))
ladder_path = ladder.write_ladder_record(rows, P.name, "embedded", root=run_root)
fig = ladder.ladder_figure(rows, title=f"{P.name}: the ladder on the embedded corpus ({P.seeds} seeds per rung)")
save_figure(fig, figures / f"07_ladder_{P.name}.png")
fig

# %% [markdown]
# ## Leave-one-out: each part of the final recipe removed in turn
#
# `frontier ablate --recipe final --steps N` trains the final recipe and the recipe without each of its learning
# changes (the bigram table, the n-gram mix, the weight average) and without all of them (the baseline), for the
# same seeds and the same number of steps: a step-limited run is nearly deterministic, so the pairs differ by the
# change alone. The equal-budget stage is the sitting's sweep of the same parts, trained interleaved on one machine.

# %%
print(format_sweep(at_steps))
if at_budget is not None:
    print()
    print(format_sweep(at_budget))
display(Markdown(report.markdown_table(parts, ["part", "gain at equal steps", "p (steps)", "steps",
                                               "gain at equal budget", "p (budget)", "budget steps (part removed)",
                                               "why"],
                                       {"gain at equal steps": "+.4f", "p (steps)": ".3f",
                                        "gain at equal budget": "+.4f", "p (budget)": ".3f"})))
fig, ax = new_figure(6.4, 3.2)
shown = [p for p in parts if p["part"] != "everything"]
ys = range(len(shown))
ax.barh([y + 0.2 for y in ys], [p["gain at equal steps"] for p in shown], height=0.4, color="C0",
        label=f"equal steps ({shown[0]['steps']})")
ax.barh([y - 0.2 for y in ys], [p["gain at equal budget"] or 0 for p in shown], height=0.4, color="C1",
        label=f"equal budget ({P.budget_s:g} reference s)")
ax.set_yticks(list(ys), [p["part"] for p in shown])
ax.axvline(0, color="0.3", lw=0.8)
ax.set_xlabel("val_bpb lost without the part\n(positive: the part helps; mean over paired seeds)")
ax.set_title(f"{P.name}: leave-one-out of `{FINAL}` ({len(at_steps['seeds'])} seeds, paired)", fontsize=9)
ax.legend(fontsize=7)
save_figure(fig, figures / f"07_ablation_{P.name}.png")
fig

# %%
display(Markdown(" ".join(
    f"Without the {p['part']} the final recipe loses {p['gain at equal steps']:+.4f} at equal steps "
    f"(p = {p['p (steps)']:.3f})"
    + (f" and {p['gain at equal budget']:+.4f} at equal budget (p = {p['p (budget)']:.3f})"
       if p["gain at equal budget"] is not None else " (not measured at equal budget)")
    + f": {'kept' if p['kept'] else 'dropped' if p['kept'] is False else 'undecided'}." for p in shown)
    + f" All of them together are worth {vs_base['gain at equal steps']:+.4f} at {vs_base['steps']} steps "
    f"(p = {vs_base['p (steps)']:.3f})."))

# %% [markdown]
# ## What the validation split leaves uncertain
#
# The embedded corpus's validation split is small; another set of documents of the same kind would give other
# numbers. A bootstrap over its documents (`frontier.study.bootstrap`: each document whole, drawn with replacement)
# shows how much the final run's val_bpb and its gain over the baseline depend on which documents happen to be in it.
# It says nothing about training noise (the seeds above); it treats the documents as independent draws.

# %%
f0, b0 = results[FINAL][0], results["baseline"][0]
one = bootstrap_bpb(f0)
diff = paired_bootstrap_bpb(b0, f0)
display(Markdown(
    f"The final run (seed 0, {f0['steps']} steps) scores {one['bpb']:.4f} on the {one['documents']} validation "
    f"documents; {one['level']:.0%} of {one['resamples']:,} draws of documents fall in {one['low']:.4f} to "
    f"{one['high']:.4f}. Its gain over the baseline's seed 0 ({b0['steps']} steps) is {diff['difference']:.4f}, and "
    f"{diff['level']:.0%} of the same draws, taken for both runs at once, fall in {diff['low']:.4f} to "
    f"{diff['high']:.4f}: the documents move the level of both runs far more than the difference between them."))

# %% [markdown]
# ## A second corpus: the standard library's source code
#
# `frontier prepare --corpus stdlib-source` builds a corpus every Python installation carries and that differs in
# kind from the embedded prose: the standard library's own modules (code, comments, docstrings), with a tokenizer
# trained on it at the same vocabulary. The final recipe and the baseline at the same steps and seeds show whether
# the gain is about text or about this text.

# %%
data2 = profile_dataset(P, corpus_name="stdlib-source")
for name, d in (("embedded", data), ("stdlib-source", data2)):
    print(f"{name}: {d.manifest['train']['documents']:,} train documents, {d.manifest['train']['tokens']:,} train "
          f"tokens; {d.manifest['val']['documents']:,} validation documents, {d.val_bytes:,} bytes "
          f"({d.val_bytes / d.manifest['val']['tokens']:.2f} bytes per token)")
print(format_sweep(stdlib))

# %% [markdown]
# ## The compressors
#
# Chapter 01's classical compressors, each given the end of the training text as context and charged for the
# validation text alone, beside the final recipe. The network never sees the validation text; PPMd and xz learn
# from every byte they encode. **Adaptive evaluation** (`frontier eval --adaptive`) lets the final model's n-gram
# tables count each validation window after scoring it, as a compressor does: a comparison on equal terms, never
# the competition's score. It needs the run's checkpoint, which is not committed: where this checkout has none,
# the row says so.

# %%
device = select_device("cpu")
adaptive_batch = 1 if P.name != "smoke" else P.eval_batch_size  # window by window; smoke only checks it runs
comp_rows = []
for corpus, d, sweep in (("embedded", data, at_steps), ("stdlib-source", data2, stdlib)):
    comp_rows += [{"corpus": corpus, "model": c["compressor"], "val_bpb": c["val_bpb"], "steps": ""}
                  for c in compressor_bpb(d)]
    for row in (sweep["rows"][0], next(r for r in sweep["rows"] if r["recipe"] == "baseline")):
        vals = [x["val_bpb"] for x in row["runs"].values()]
        comp_rows.append({"corpus": corpus, "model": f"{row['recipe']} (mean of {len(vals)} seeds)",
                          "val_bpb": report.mean_std(vals)[0], "std": report.mean_std(vals)[1],
                          "steps": sweep["steps"]})
    run0 = Path(sweep["rows"][0]["runs"]["0"]["run_dir"])
    if (run0 / "checkpoint.pt").is_file():
        adaptive = evaluate_run(run0, d, device, log=log, adaptive=True, adaptive_batch=adaptive_batch)
        comp_rows.append({"corpus": corpus, "model": f"{FINAL}, adaptive (counts what it has scored), seed 0",
                          "val_bpb": adaptive["val_bpb_adaptive"], "steps": sweep["steps"]})
    else:
        log(f"{corpus}: no checkpoint in {run0}: the adaptive row is not measured in this checkout")
display(Markdown(report.markdown_table(comp_rows, ["corpus", "model", "val_bpb", "steps"])))
fig, axes = new_figure(10.0, 4.2, ncols=2)
for ax, corpus in zip(axes, ("embedded", "stdlib-source")):
    rs = sorted((r for r in comp_rows if r["corpus"] == corpus), key=lambda r: r["val_bpb"])
    ax.barh(range(len(rs)), [r["val_bpb"] for r in rs], xerr=[r.get("std", float("nan")) for r in rs], capsize=3,
            color=["C2" if r["model"].startswith(FINAL) else "C0" if r["model"].startswith("baseline") else "0.6"
                   for r in rs])
    ax.set_yticks(range(len(rs)), [r["model"] for r in rs], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("val_bpb")
    ax.set_title(corpus, fontsize=9)
fig.suptitle(f"{P.name}: compressors and networks ({STEPS} steps, bars ± std of seeds)", fontsize=9)
save_figure(fig, figures / f"07_compressors_{P.name}.png")
fig

# %% [markdown]
# ## What did not help
#
# The changes the final recipe does not take, each judged by the rule against runs of its own sitting: the
# model's size and the few-hundred-step tuning (sweeps at equal budget, read here), gated attention (three paired
# seeds under an earlier code and the wall clock, read from its records: it has not been trained again), and in
# their own chapters the compiled optimiser step (02), the dense bigram update (04), the streamed n-gram counting,
# better tables and per-context mixing (06).

# %%
wash = []
for name in ("budget-size", "budget-tuning-3x192"):
    sw = newest_sweep(run_root, P.name, name)
    if sw is None:
        continue
    for row in sw["rows"][1:]:
        steps = sorted(x["steps"] for x in row["runs"].values())
        wash.append({"change": f"{row['name']} (sweep {name})", "gain": row["gain"], "p": row["p"],
                     "steps": f"{steps[0]}-{steps[-1]}", "verdict": row["verdict"]})
gate_dirs = [Path(run_root) / P.name / "gate" / f"s{s}" for s in range(P.seeds)]
ema_dirs = [Path(run_root) / P.name / "ema" / f"s{s}" for s in range(P.seeds)]
if all((d / "result.json").is_file() for d in gate_dirs + ema_dirs):
    g_gate, d_gate = compare([str(d) for d in ema_dirs + gate_dirs], paired=True)
    gate_steps = sorted(g["steps"] for g in [records.load_record(d) for d in gate_dirs])
    wash.append({"change": f"gated attention on ema (code {report.short_code(records.load_record(gate_dirs[0])['code'])}, "
                           "wall clock)", "gain": -d_gate[0].delta, "p": d_gate[0].p,
                 "steps": f"{gate_steps[0]}-{gate_steps[-1]}", "verdict": d_gate[0].verdict})
display(Markdown(report.markdown_table(wash, {"change": "change", "gain": "gain (positive is better)", "steps": "steps",
                                              "p": "p (paired)", "verdict": "verdict"}, {"gain": "+.4f", "p": ".3f"})
                 if wash else "no sweep records of this profile"))

# %% [markdown]
# ## Theirs and ours, and the goals
#
# What transfers from 30 minutes on a Trn2 chip to three reference minutes on two CPU cores. Each line is computed
# from this chapter's tables; the write-up's figures are quoted.

# %%
gains = {r["rung"]: r for r in rows if "gain" in r}
noise = [r["std"] for r in rows if "mean" in r and r["n"] > 1]
emb = {r["model"]: r["val_bpb"] for r in comp_rows if r["corpus"] == "embedded"}
compressors = {k: v for k, v in emb.items() if not k.startswith((FINAL, "baseline"))}
best_c = min(compressors, key=compressors.get) if compressors else None
adaptive_key = next((k for k in emb if "adaptive" in k), None)
lines = [
    f"- **The gain**: {final['total']:+.4f} here ({base['mean']:.4f} -> {final['mean']:.4f}), against the write-up's "
    f"{ladder.WRITEUP_TRN2['baseline'] - ladder.WRITEUP_TRN2['final']:.3f} on Trn2.",
    f"- **The n-gram mix**: {gains['n-gram mix']['gain']:+.4f} at equal budget here, against about "
    f"{ladder.WRITEUP_TRN2['ngram_gain']} on Trn2: a model trained for minutes on a small corpus leans on exact "
    "counts far more than one trained for half an hour on web text." if gains['n-gram mix']['gain'] > 0 else
    f"- **The n-gram mix**: {gains['n-gram mix']['gain']:+.4f} here.",
    f"- **Noise**: their repeats differed by up to {ladder.WRITEUP_TRN2['noise']}; here the seed-to-seed std per rung "
    f"runs from {min(noise):.4f} to {max(noise):.4f}, which is why each learning change is judged at equal steps "
    "first (paired runs that differ by the change alone).",
    f"- **Goals** (issue 25, this profile): `final` <= 1.65: {final['mean']:.4f} "
    f"({'met' if final['mean'] <= 1.65 else 'missed'}); at least 0.25 below the baseline: {final['total']:+.4f} "
    f"({'met' if final['total'] >= 0.25 else 'missed'})"
    + (f"; below the best compressor ({best_c}, {compressors[best_c]:.4f}) without adaptation: "
       f"{'met' if final['mean'] < compressors[best_c] else 'missed'}" if best_c else "")
    + (f"; adaptively ({emb[adaptive_key]:.4f} at {STEPS} steps): "
       f"{'met' if emb[adaptive_key] < compressors[best_c] else 'missed'}" if best_c and adaptive_key else "") + ".",
]
display(Markdown("\n".join(lines)))

# %% [markdown]
# ## Appendix: where the numbers come from
#
# The records this execution wrote or read, the code that trained each run, and what the experiments said about
# reusing or training them.

# %%
print(f"ladder record: {ladder_path}")
for sw in (at_steps, at_budget, stdlib):
    if sw is not None:
        print(f"sweep record: {sw['path']}")
print(report.provenance(list({x["run_dir"]: x for rs in results.values() for x in rs}.values())))
print("\n".join(log_lines))
