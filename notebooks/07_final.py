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
# # Chapter 7: the final recipe, and where the gains came from
#
# The write-up ends at 0.959 bits per byte from the baseline's 1.259 (theirs, one Trn2 chip, 1,800 s). This chapter
# asks what the recipe the rule built scores here, on validation and on the held-out test split; which of its parts
# carry the gain, at equal steps and at equal budget; which batch size the budget favours; how much the test split's
# own documents leave uncertain; whether the numbers come back when the runs are trained again on another machine;
# and where the classical compressors stand on the same text.
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
# ## The record card
#
# `final` names the recipe the ladder's rule built (`frontier.recipes.FINAL`): `ngram-wide`, the n-gram mix (its
# tables four times the profile's buckets a context length) on the hashed bigram table, compiled, with Muon's
# momentum warmed up over the whole run. A run's record card (`frontier.study.card`; `frontier card RUN_DIR` prints
# all of it) gathers what a reader needs to check one run. Here its seed 0: the score on both held-out splits with the
# steps and epochs behind it, the one command that trains it again (checked by resolving its flags back to the
# recorded config), and what the scored model holds, in bytes.

# %%
from frontier import recipes
from frontier.records import epochs_read, shown_path
from frontier.study import card
from frontier.study.report import markdown_table
from IPython.display import Markdown, display

rec = ch.run("final", 0)
print(f"final = `{recipes.FINAL}`, seed 0: {shown_path(rec['run_dir'])}")
test = f", test_bpb {rec['test_bpb']:.4f}" if rec.get("test_bpb") is not None else " (this data has no test split)"
print(f"val_bpb {rec['val_bpb']:.4f}{test}; {rec['steps']:,} steps, {epochs_read(rec):.2f} epoch of the training "
      f"split ({rec['tokens']:,} tokens read)")
again = card.reproduce(rec)
print("reproduce: " + " ".join(again.argv))
print("the flags resolve to the recorded config: " + ("field for field" if not again.differs else
                                                       "NOT exactly: " + "; ".join(again.differs)))
size = card.artifact_bytes(rec)
params = card.parameter_parts(rec)
display(Markdown(markdown_table(
    [{"part": k, "bytes": v, "mib": v / 2**20} for k, v in size.items()]
    + [{"part": "total", "bytes": sum(size.values()), "mib": sum(size.values()) / 2**20}],
    {"part": "what the scored model holds", "bytes": "bytes", "mib": "MiB"}, {"mib": ".1f"})))
print("trained parameters: " + ", ".join(f"{k} {v:,}" for k, v in params.items()))

# %% [markdown]
# The n-gram tables are counts, not trained weights, and they are most of the artifact; the bigram table is most
# of the trained parameters. The network itself is small: the cpu profile's 3 blocks of width 192.

# %% [markdown]
# ## The ladder
#
# Each rung is one recipe, five seeds at the profile's budget (180 reference seconds bought as steps before the
# run); the ladder record is rebuilt here from the same runs, with the gains at equal steps from the 400-step
# leave-one-out, as `frontier ladder ... --equal-steps ...` in the README does. A speed rung (torch.compile) is
# judged by the steps it buys; a learning rung by the rule (`frontier.study.compare.RULE`: at equal steps first,
# paired by seed, then at equal budget; kept only at p < 0.01 over at least 5 seeds). The NKI kernels rung changes
# nothing a CPU can train (chapter 03). The momentum warm-up changes no step's cost, so it buys the n-gram mix's own
# steps seed by seed: its budget runs are its comparison at equal steps too. The weight average is judged by `ema`'s
# own runs (their live weights at the same step). `final` is the last rung, the wider n-gram tables, shown once.

# %%
from frontier.figures import new_figure
from frontier.recipes import get_recipe
from frontier.records import shown_path
from frontier.study import ablation, ladder
from frontier.study.report import markdown_table
from frontier.study.sweep import newest_sweep
from IPython.display import Markdown, display

P = ch.profile
n = P.seeds
steps = 400 if P.name == "cpu" else 10
final = get_recipe("final").name
loo, avg = ablation.sweep_name(final, steps, P.corpus), ablation.sweep_name("ema", steps, P.corpus)
if newest_sweep(ch.root, P.name, loo) is None:  # the final taken apart at equal steps (committed at cpu)
    ablation.run_ablation(final, P, seeds=range(n), steps=steps, root=ch.root, removes=ablation.parts(final),
                          log=ch.log)
if newest_sweep(ch.root, P.name, avg) is None:  # the weight average, read from `ema`'s own runs (committed at cpu)
    ablation.run_ablation("ema", P, seeds=range(n), steps=steps, root=ch.root, removes=["average"], log=ch.log)
# each part of the final at equal steps is the rung that switches it on (`ladder.part_pair`)
specs = []
for row in newest_sweep(ch.root, P.name, loo)["rows"][1:]:
    part = ablation.part_of(row)  # "- n-gram mix (= ...)" -> "n-gram mix"
    _, above = ladder.part_pair(final, part)  # one clear error for a part that no rung switches on
    if part != "everything":
        specs.append(f"{above}={loo}:{row['name']}:removes")
specs.append(f"ema={avg}:- weight average (its live weights):removes")
equal_steps = ladder.parse_equal_steps(specs, ch.root, P.name)
rows = ladder.ladder_rows(ladder.run_ladder(P, n, root=ch.root, log=ch.log), equal_steps=equal_steps)
record = ladder.latest_ladder_record(P.name, root=ch.root)
if record is None:  # none for this profile and corpus yet: keep this one
    ladder.write_ladder_record(rows, P.name, P.corpus, root=ch.root)
    record = ladder.latest_ladder_record(P.name, root=ch.root)
stored = {r["rung"]: r for r in record["rows"] if "mean" in r}
differ = [r["rung"] for r in rows if "mean" in r and (
    r["rung"] not in stored or r["values"] != stored[r["rung"]]["values"]
    or r.get("test_values") != stored[r["rung"]].get("test_values"))]
print(f"ladder record {shown_path(record['path'])}: the table rebuilt from the runs "
      + ("holds the same per-seed val and test bpb in every rung" if not differ else f"differs in {differ}"))

twin = any(r["rung"] != "final" and r.get("recipe") == final for r in rows)  # final is another rung's recipe
shown = [r for r in rows if not (twin and r["rung"] == "final")]


def rung(r):
    return f"{r['rung']} (= final)" if twin and r.get("recipe") == final and r["rung"] != "final" else r["rung"]


display(Markdown(markdown_table([{**ladder.display_row(r), "rung": rung(r)} for r in shown], {
    "rung": "rung", "recipe": "recipe", "bpb": "val_bpb (mean ± std, seeds, steps)",
    "test": "test_bpb (mean ± std; gain over the rung below, paired)", "regime": "epochs read; val - train loss",
    "equal_steps": "gain at equal steps (paired by seed)", "budget": "gain at equal budget (paired by seed)",
    "verdict": "verdict (the rule)"})))

measured = [r for r in shown if "mean" in r]
panels = [("val_bpb", "values", "validation")] + (
    [("test_bpb", "test_values", "test (reported, chooses nothing)")] if all(r.get("test_values") for r in measured)
    else [])
fig, axes = new_figure(6.0 * len(panels), 4.2, ncols=len(panels))
axes = axes if len(panels) > 1 else [axes]
for ax, (score, key, what) in zip(axes, panels):
    xs = range(len(measured))
    means = [sum(r[key]) / len(r[key]) for r in measured]
    stds = [r["std"] if key == "values" else r["test_std"] for r in measured]
    ax.errorbar(xs, means, yerr=stds, fmt="o-", color="C0" if key == "values" else "C1", capsize=4,
                label="mean ± std over seeds")
    for x, r in zip(xs, measured):
        ax.scatter([x] * len(r[key]), r[key], s=10, color="0.4", alpha=0.6)
    ax.set_xticks(list(xs), [f"{rung(r)}\n{ladder.steps_span(r['steps_each'])}, "
                             f"{min(r['epochs_each']):.2f} ep" if r.get("epochs_each") else
                             f"{rung(r)}\n{ladder.steps_span(r['steps_each'])}" for r in measured],
                  rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(f"{score} (lower is better)")
    ax.set_title(f"{what}: {P.name} profile, {P.corpus} corpus,\n{measured[0]['n']} seeds a rung", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
ch.figure(fig, "07_ladder")

# %% [markdown]
# In the committed record (`runs/cpu/ladder/docstrings-20261205-191705.json`) every rung reads about a fifth of an
# epoch, and validation lies 0.02 nats a token above training for the network alone but 0.36-0.37 for the rungs with
# the n-gram mix: the tables have counted the training text, and that gap is what they know of it. On test the
# n-gram mix's gain over `bigram` at equal budget (375 against 473 steps) shrinks from +0.0842 to +0.0520
# (p = 0.007). The momentum warm-up
# is the smallest kept gain, +0.0019 on validation and on test, and among the surest: every seed gains between
# 0.0017 and 0.0021 on validation, because each pair of runs shares its seed, its data order and its 375 steps. The
# wider tables gain +0.0065 at 400 steps (p = 0.003) and +0.0104 at the budget (p = 0.001; +0.0112 on test), where
# their step, no dearer, buys 385 steps against 375.

# %% [markdown]
# ## Leave-one-out
#
# `frontier.study.ablation.run_ablation` trains (or reuses) the final recipe and the final without each of its parts,
# for the same seeds and 400 steps: a step-limited run is nearly deterministic, so each pair differs by the part
# alone. Without everything it is the baseline at 400 steps. The equal-budget stage is the ladder's pairs: each
# part's rung over the rung it is built on, at the steps the budget buys each. The final's momentum warm-up is not
# among these parts: a setting of the optimiser, not a part of the model, it stays in every variant and is measured
# by its own rung above. The weight average, which left the final recipe, is judged in the ladder above (taken out
# of `ema` at the same 400 steps) and under "What did not help" below.

# %%
from frontier.figures import new_figure
from frontier.recipes import get_recipe
from frontier.study import ablation, ladder
from frontier.study.compare import Group, keep, p_text, paired_test
from frontier.study.report import markdown_table
from frontier.study.sweep import format_sweep
from IPython.display import Markdown, display

P = ch.profile
n = P.seeds
steps = 400 if P.name == "cpu" else 10
final = get_recipe("final").name
at_steps = ablation.run_ablation(final, P, seeds=range(n), steps=steps, root=ch.root,
                                 removes=ablation.parts(final), log=ch.log)
print(format_sweep(at_steps))


def group(name, recs, score="val_bpb"):
    return Group(name, tuple(r[score] for r in recs), (), tuple(r["seed"] for r in recs))


# Each part's rung over the rung it is built on, at the budget (the ladder's pairs: `ladder.part_pairs`).
pairs = ladder.part_pairs(final)
runs = {r: ch.seeds(r, n) for r in dict.fromkeys(x for pair in pairs.values() for x in pair)}
parts = []
for row in at_steps["rows"][1:]:
    part = ablation.part_of(row)  # "- n-gram mix (= ...)" -> "n-gram mix"
    gain, p, seeds = ablation.part_gain(row)
    below, above = ladder.part_pair(final, part)
    d = paired_test(group(below, runs[below]), group(above, runs[above]))
    has_test = all(r.get("test_bpb") is not None for r in runs[below] + runs[above])
    t = paired_test(group(below, runs[below], "test_bpb"), group(above, runs[above], "test_bpb")) if has_test else None
    verdict = "" if part == "everything" else {True: "kept", False: "dropped", None: "not shown"}[
        keep((gain, p, seeds), (-d.delta, d.p, d.pairs))[0]]
    parts.append({"part": part, "steps_gain": gain, "steps_sd": row.get("diff_std"), "steps_p": p,
                  "steps_test": None if row.get("test_gain") is None else -row["test_gain"],
                  "budget_gain": -d.delta, "budget_sd": d.diff_std, "budget_p": d.p,
                  "budget_test": None if t is None else -t.delta,
                  "budget_steps": f"`{above}` {runs[above][0]['steps']} vs `{below}` {runs[below][0]['steps']}",
                  "verdict": verdict})
part_rows = [{**x, "steps_p": p_text(x["steps_p"]), "budget_p": p_text(x["budget_p"])} for x in parts]
display(Markdown(markdown_table(part_rows, {
    "part": "part removed", "steps_gain": f"gain at {steps} steps (val)", "steps_p": "p", "steps_test": "(test)",
    "budget_gain": "gain at equal budget (val)", "budget_p": "p", "budget_test": "(test)",
    "budget_steps": "steps at the budget", "verdict": "verdict (the rule)"})))

shown = [p for p in parts if p["part"] != "everything"]
fig, ax = new_figure(7.0, 3.2)
ys = range(len(shown))
ax.barh([y + 0.2 for y in ys], [p["steps_gain"] for p in shown], height=0.4, color="C0",
        xerr=[p["steps_sd"] or 0 for p in shown], capsize=3, label=f"equal steps ({steps})")
ax.barh([y - 0.2 for y in ys], [p["budget_gain"] for p in shown], height=0.4, color="C1",
        xerr=[p["budget_sd"] or 0 for p in shown], capsize=3, label=f"equal budget ({P.budget_s:g} reference s)")
ax.set_yticks(list(ys), [p["part"] for p in shown])
ax.axvline(0, color="0.3", lw=0.8)
ax.set_xlabel("val_bpb the part is worth (positive: it helps;\nmean over paired seeds, ± std of the differences)")
ax.set_title(f"{P.name}: each part of the final (`{final}`) removed ({n} seeds, paired)", fontsize=9)
ax.legend(fontsize=7)
ch.figure(fig, "07_ablation")

# %% [markdown]
# In the committed runs (`runs/cpu/sweeps/sweep-ablation-ngram-wide-400-docstrings-20261205-190817.json`) the
# n-gram mix is worth +0.1446 at 400 steps (p < 0.001; +0.1151 on test), the bigram table +0.0376 (p < 0.001;
# +0.0407 on test) and the wider tables +0.0065 (p = 0.003; +0.0068 on test): all kept, and all better at equal
# budget too, in the ladder record (`runs/cpu/ladder/docstrings-20261205-191705.json`): the n-gram mix +0.0842
# (p = 0.001; `ngram` 375 steps against `bigram`'s 473), the bigram table +0.0377 (p = 0.001; `bigram` 473 against
# `compile`'s 501), the wider tables +0.0104 (p = 0.001; 385 against `ngram-momentum`'s 375). Taken out of the
# earlier finals at the same 400 steps, `ema` and `ngram-momentum`, the n-gram mix was worth +0.1383 and +0.1381:
# with the wider tables it is worth more. Everything together is worth +0.2092 at 400 steps (+0.1781 on test), a
# little more than at the budget (+0.2013, +0.1703 on test), where the baseline's cheaper step buys it 402 steps
# against the final's 385.

# %% [markdown]
# ## What the test split leaves uncertain
#
# The seeds above measure training noise. The test split's 131 documents are one draw of documents of this kind;
# another draw would give other numbers. A bootstrap over the documents (`frontier.study.bootstrap`: each document
# whole, with its bits and bytes from the record's `test_by_document`, drawn with replacement) shows how much the
# final's score and its gain over the baseline depend on which documents happen to be in the split. The gain is
# resampled for both runs at once, so each document's own difficulty cancels.

# %%
import numpy as np

from frontier.study.bootstrap import bootstrap_bpb, paired_bootstrap_bpb

final, base = ch.run("final", 0), ch.run("baseline", 0)
split = "test" if final.get("test_by_document") and base.get("test_by_document") else "val"
if split == "val":
    print("this data has no test split: the validation documents instead")
docs_f, docs_b = final[f"{split}_by_document"], base[f"{split}_by_document"]
one = bootstrap_bpb(docs_f)
diff = paired_bootstrap_bpb(docs_b, docs_f)
print(f"final, seed 0 ({final['steps']} steps): {split}_bpb {one['bpb']:.4f} on {one['documents']} documents; "
      f"{one['level']:.0%} of {one['resamples']:,} draws in [{one['low']:.4f}, {one['high']:.4f}]")
print(f"its gain over the baseline's seed 0 ({base['steps']} steps): {diff['difference']:.4f}; {diff['level']:.0%} "
      f"of the same draws in [{diff['low']:.4f}, {diff['high']:.4f}]")
per_doc = np.array(docs_b["bits"]) / np.array(docs_b["bytes"]) - np.array(docs_f["bits"]) / np.array(docs_f["bytes"])
print(f"document by document the final is better on {int((per_doc > 0).sum())} of {len(per_doc)} "
      f"(per-document gains from {per_doc.min():+.3f} to {per_doc.max():+.3f})")

# %% [markdown]
# In the committed runs (seed 0 of each: the final's 385 steps, the baseline's 402) the final's test score has a 95%
# interval from 1.598 to 1.722 and its gain over the baseline, 0.147, one from 0.110 to 0.189: the documents move
# both runs' levels together, so the gain is surer than either level. It stays far from zero, and 0.20 lies outside
# it.

# %% [markdown]
# ## Trained again, whole
#
# `frontier retrain RUN_DIR --out DIR` trains a recorded run again, whole, from its config and seed, and writes
# both sides (steps, val and test bpb, the machines) to a bench record of kind `retrain`. Under the steps rule the
# budget buys the same steps on any machine, so the steps must agree; the scores may differ only by how another CPU
# or thread count rounds. The runs below were trained again on hosts of the same CPU model (the machine column), four
# of them at another thread count, and three, the final's seeds 0 and 1 among them, on the AVX2 vector kernels forced
# on the AVX512 host: a stand-in for an older CPU, whose rounding moved the scores by under 5e-7 where the final's
# seeds differ by 0.003 (docs/log.md). A second CPU model itself is not shown. `ngram/s0` is seed 0 of `ngram`, the rung the
# final is built on, on the n-gram tables before the profile sized them for this corpus, `ngram/s0-3` the same seed
# on the tables it has now; `baseline/s0` is an earlier run of the baseline's seed 0, 412 steps at the cost table of
# its day, where the ladder's is `baseline/s0-2`, 402 steps at the cost measured since. Runs reproduce another way
# too: `ngram-momentum`, trained under the schedule screen's label and again under its own, gave the same steps and
# identical scores on each seed (docs/log.md); and the final's 400-step runs without the n-gram mix scored exactly
# what `ngram-momentum`'s runs without it scored (with the mix off, the tables' size changes nothing that is
# trained), so a leave-one-out names that variant `ngram-momentum-no-ngram` (`frontier.study.ablation.without`) and
# takes those runs instead of training them again.

# %%
from frontier.records import shown_path
from frontier.study.bench_records import load_bench_record
from frontier.study.report import markdown_table
from frontier.study.retrain import machine
from IPython.display import Markdown, display

folder = ch.root / "bench" / ch.profile.name
found = [load_bench_record(p) for p in sorted(folder.glob("retrain-*.json"))]
if not found:
    print(f"no retrain records in {shown_path(folder)}: none exist yet")
else:
    rows = []
    for r in found:
        a, b = r["record_side"], r["here"]
        for side, s in (("record", a), ("trained again", b)):
            rows.append({"run": shown_path(r["run"]), "side": side, "steps": s["steps"], "val": f"{s['val_bpb']:.4f}",
                         "test": "-" if s.get("test_bpb") is None else f"{s['test_bpb']:.4f}",
                         "machine": machine(s.get("hardware") or {})})
        rows.append({"run": "", "side": "difference", "steps": "same" if r["same_steps"] else "DIFFER",
                     **{k: "-" if r["differences"].get(f"{k}_bpb") is None else f"{r['differences'][f'{k}_bpb']:+.1e}"
                        for k in ("val", "test")}})
    display(Markdown(markdown_table(rows, {"run": "run", "side": "", "steps": "steps", "val": "val_bpb",
                                           "test": "test_bpb", "machine": "machine"})))
    print("records: " + ", ".join(shown_path(r["path"]) for r in found))

# %% [markdown]
# ## The batch size at the budget
#
# A batch size changes what a step costs, so, like a model size, it is judged at equal budget: each size buys its
# own steps from the committed cost table (`frontier bench --costs --batches` measured them). The screen is of
# `ngram`, the n-gram mix the final is built on, and each size's runs pair by seed with `ngram`'s. Half, double and
# four times the profile's sequences a step are screened on seeds 0 and 1
# (`frontier.study.experiments.BATCH_SWEEPS`); a size better than `ngram` on both seeds gets every seed and the
# rule's verdict. A gain the rule does not show is trained again on fresh seeds, beside `ngram`'s own, and judged on
# those alone: more seeds added to a near miss would be a second look at the same test.

# %%
from frontier.figures import new_figure
from frontier.records import epochs_read
from frontier.study import experiments as ex
from frontier.study.compare import p_text
from frontier.study.report import markdown_table
from IPython.display import Markdown, display

P = ch.profile
n = P.seeds
screened = "ngram"  # the batch screen is of `ngram`, the n-gram mix the final is built on


def run(seed, sizes):  # the recipe at another batch size gets folders of its own: `ngram-batch-32/s0`
    return ch.run(screened, seed, sizes=sizes, label=f"{screened}-{ex.size_label(sizes)}" if sizes else None)


base, runs, replicated = ex.batch_screen(run, ex.BATCH_SWEEPS.get(P.name, []), n)
rows = []
for b, v in runs.items():
    verdict = ex.batch_verdict(base, v)
    rows.append({"batch": b, "steps": v[0]["steps"], "tokens": v[0]["tokens"], "epochs": epochs_read(v[0]),
                 "seeds": len(v), "val": sum(r["val_bpb"] for r in v) / len(v), "gain": verdict["gain"],
                 "p": p_text(verdict["p"]), "test": verdict["test_gain"], "verdict": verdict["verdict"]})
rows.insert(0, {"batch": P.batch_size, "steps": base[0]["steps"], "tokens": base[0]["tokens"],
                "epochs": epochs_read(base[0]), "seeds": n,
                "val": sum(r["val_bpb"] for r in base) / n, "gain": None, "p": "", "test": None,
                "verdict": f"`{screened}` (the profile's batch)"})
display(Markdown(markdown_table(sorted(rows, key=lambda r: r["batch"]), {
    "batch": "sequences a step", "steps": "steps (bought)", "tokens": "tokens read", "epochs": "epochs read",
    "seeds": "seeds", "val": "val_bpb (mean)", "gain": "gain at equal budget (val, paired)", "p": "p", "test": "gain on test",
    "verdict": "verdict (the rule)"}, {"epochs": ".3f", "val": ".4f", "gain": "+.4f", "test": "+.4f"})))
for b, (fb, fv) in replicated.items():
    verdict = ex.batch_verdict(fb, fv)
    test = "" if verdict["test_gain"] is None else f", {verdict['test_gain']:+.4f} test ({p_text(verdict['test_p'])})"
    print(f"batch {b}, replicated on seeds {n}-{2 * n - 1} alone: gain {verdict['gain']:+.4f} val "
          f"({p_text(verdict['p'])}){test}: {verdict['verdict']}")

fig, ax = new_figure(6.4, 3.8)
every = {P.batch_size: base, **runs}
for b, recs in sorted(every.items()):
    ax.scatter([b] * len(recs), [r["val_bpb"] for r in recs], s=12, color="0.4", alpha=0.6)
    ax.annotate(f"{recs[0]['steps']} steps\n{len(recs)} seeds", (b, max(r["val_bpb"] for r in recs)),
                textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
xs = sorted(every)
ax.plot(xs, [sum(r["val_bpb"] for r in every[b]) / len(every[b]) for b in xs], "o-", color="C0",
        label="mean over the seeds run from seed 0")
ax.set_xscale("log", base=2)
ax.set_xticks(xs, [str(b) for b in xs])
ax.set_xlabel("sequences a step (each buys its own steps at the budget)")
ax.set_ylabel("val_bpb (lower is better)")
ax.set_title(f"{screened} at {P.budget_s:g} reference s, {P.name} profile, {P.corpus} corpus\n"
             "(the replication's fresh seeds are not drawn)", fontsize=9)
ax.margins(x=0.12, y=0.25)
ax.grid(alpha=0.3)
ax.legend(fontsize=8, loc="lower right")  # upper center hid the label of the size that scores worst
ch.figure(fig, "07_batch")

# %% [markdown]
# At the budget (committed runs) the sizes order by the tokens they read more than by their steps: 8 sequences a
# step buy 670 steps but read 1.37M tokens, and lose on both seeds (about 0.02); 64 read the most, 1.77M, in 108
# steps, and lose by about 0.06: too few steps. 32 sequences buy 208 steps, read 1.70M tokens against `ngram`'s
# 1.54M (a larger step keeps the two cores busier: the cost table prices it at about 1.8 times `ngram`'s, not 2),
# 0.21 epoch, and beat `ngram` on all five seeds: +0.0051 on validation (p = 0.015), +0.0046 on test. The rule
# needs p < 0.01, so the size was trained again on seeds 5-9: +0.0017 (p = 0.096), better on each of those seeds too,
# and still not shown. `ngram` kept the profile's 16 sequences a step, and so does the final built on it. In
# `ngram` Muon's momentum warms up over 300 steps, longer than the 208 that batch 32 buys; the final's warms up over
# the whole run, however many steps that is. Screened on `ngram-momentum` (seeds 0 and 1, paired with its runs), batch 32
# gained +0.0057 val_bpb on seed 0 and lost 0.0011 on seed 1 (208 steps against 375), so the screen stopped there
# (`runs/cpu/docstrings/ngram-momentum-batch-32/`, docs/log.md).

# %% [markdown]
# ## What did not help
#
# Gated attention (`gate`: a per-head gate on the attention output, on top of `ema`) was measured at 400 steps
# against `ema`, paired by seed; the weight average is chapter 06's (not shown: it left the final recipe).

# %%
from frontier.study.compare import Group, judge, p_text, paired_test
from frontier.study.report import markdown_table
from IPython.display import Markdown, display

n = ch.profile.seeds
steps = 400 if ch.profile.name == "cpu" else 10
gate = [ch.run("gate", s, steps=steps, label=f"gate-{steps}steps") for s in range(n)]
ema = [ch.run("ema", s, steps=steps, label=f"ema-{steps}steps") for s in range(n)]


def group(name, recs, score="val_bpb"):
    return Group(name, tuple(r[score] for r in recs), (), tuple(r["seed"] for r in recs))


g = paired_test(group("ema", ema), group("gate", gate))
t = (paired_test(group("ema", ema, "test_bpb"), group("gate", gate, "test_bpb"))
     if all(r.get("test_bpb") is not None for r in ema + gate) else None)
a = paired_test(group("live", ema, "val_bpb_live"), group("mix", ema))
rows = [{"change": "gated attention, added to `ema`", "gain": -g.delta, "p": p_text(g.p),
         "test": None if t is None else -t.delta,
         "verdict": judge(-g.delta, g.p, n)},
        {"change": "the weight average (chapter 06), its mix against its live weights", "gain": -a.delta,
         "p": p_text(a.p), "test": None, "verdict": judge(-a.delta, a.p, n)}]
print(f"{n} seeds, {steps} steps each: `gate` " + ", ".join(f"{r['val_bpb']:.4f}" for r in gate)
      + "; `ema` " + ", ".join(f"{r['val_bpb']:.4f}" for r in ema))
display(Markdown(markdown_table(rows, {"change": "change", "gain": f"gain at {steps} steps (val, paired)", "p": "p",
                                       "test": "gain on test", "verdict": "verdict (the rule)"})))

# %% [markdown]
# A change that is not better at equal steps, at p < 0.01 over 5 seeds, is not shown, and the final recipe does
# not take it. Gated attention was therefore not trained at the budget; the weight average was, and there its
# +0.0016 over `ngram` is the five steps the cost table's bench spread gives it (chapter 06).

# %% [markdown]
# ## The compressors
#
# A classical compressor given the training text and charged for the held-out text alone
# (`frontier.study.compressors`: `8 * (len(compress(train + test)) - len(compress(train))) / len(test)`) is scored
# the way the competition scores a model trained on that text: the competition-style score. The same compressor on
# the held-out text alone, adapting as it reads with nothing before it, is another score and is never ranked with
# the first. The final recipe never adapts to what it scores.

# %%
from frontier.figures import new_figure
from frontier.records import shown_path
from frontier.study.bench_records import load_bench_record
from frontier.study.compressors import run_compressor_bench
from frontier.study.report import markdown_table, mean_std
from IPython.display import Markdown, display

n = ch.profile.seeds
folder = ch.root / "bench" / ch.profile.name
found = [r for r in (load_bench_record(p) for p in sorted(folder.glob("compressors-*.json")))
         if r["arguments"].get("manifest_hash") == ch.data.manifest_hash]
comp = found[-1] if found else run_compressor_bench(ch.data, ch.profile.name, folder, log=ch.log)
split = "test" if ch.data.has_test else "val"
print(f"compressors record {shown_path(comp['path'])}; scored on the {split} split")
models = {name: ch.seeds(name, n) for name in ("final", "baseline")}
rows = [{"by": f"`{name}` ({len(recs)} seeds, {recs[0]['steps']} steps)",
         "given": mean_std(r[f"{split}_bpb"] for r in recs)[0], "alone": None} for name, recs in models.items()]
rows += [{"by": c["compressor"], "given": c[f"{split}_bpb"], "alone": c[f"{split}_bpb_alone"]} for c in comp["rows"]]
display(Markdown(markdown_table(sorted(rows, key=lambda r: r["given"]), {
    "by": "scored by", "given": f"{split}_bpb given the training text (competition-style)",
    "alone": f"{split}_bpb of the split alone (adapting as it reads)"})))

fig, (left, right) = new_figure(11.0, 3.8, ncols=2)
given = sorted(rows, key=lambda r: r["given"])
left.barh(range(len(given)), [r["given"] for r in given],
          color=["C2" if r["by"].startswith("`final`") else "C0" if r["by"].startswith("`baseline`") else "0.6"
                 for r in given])
left.set_yticks(range(len(given)), [r["by"].replace("`", "") for r in given], fontsize=8)
left.invert_yaxis()
left.set_xlabel(f"{split}_bpb")
left.set_title("given the training text: the competition-style score\n(green: final, blue: baseline, grey: "
               "compressors)", fontsize=9)
alone = sorted((r for r in rows if r["alone"] is not None), key=lambda r: r["alone"])
right.barh(range(len(alone)), [r["alone"] for r in alone], color="C4")
right.set_yticks(range(len(alone)), [r["by"] for r in alone], fontsize=8)
right.invert_yaxis()
right.set_xlabel(f"{split}_bpb")
right.set_title("the split alone, adapting as it reads:\nanother score, not ranked with the left", fontsize=9)
ch.figure(fig, "07_compressors")

# %% [markdown]
# On this templated API text PPMd at order 16, given the training text, scores 1.4242 on test against the final's
# 1.6570 (385 steps, seed 0 to 4's mean; the compressors' committed record,
# `runs/bench/cpu/compressors-cpu-20261204-042610.json`): far ahead. It counts
# contexts of up to 16 bytes over all of the training text and keeps counting through the test text as it encodes
# it. The final reads a fifth of an epoch of the training text; its n-gram tables, counted from the whole split but
# fixed while it scores, are the part of it that does the same kind of work.

# %% [markdown]
# ## Theirs and ours
#
# The write-up's numbers are theirs (one Trn2 chip, 1,800 s, their data and 8,192-token vocabulary); ours are the
# ladder's, measured here on the test split. The goal here was a final 0.20 bits per byte below the baseline on
# test.

# %%
from frontier.study.compare import Group, paired_test
from frontier.study.ladder import WRITEUP_TRN2
from frontier.study.report import markdown_table, mean_std
from IPython.display import Markdown, display

n = ch.profile.seeds
base, final = ch.seeds("baseline", n), ch.seeds("final", n)
split = "test" if all(r.get("test_bpb") is not None for r in base + final) else "val"


def group(name, recs):
    return Group(name, tuple(r[f"{split}_bpb"] for r in recs), (), tuple(r["seed"] for r in recs))


d = paired_test(group("baseline", base), group("final", final))
b, f = mean_std(r[f"{split}_bpb"] for r in base)[0], mean_std(r[f"{split}_bpb"] for r in final)[0]
theirs = WRITEUP_TRN2["baseline"] - WRITEUP_TRN2["final"]
p_paired = f"p = {d.p:.4f}" if d.p >= 1e-4 else "p < 0.0001"
display(Markdown(markdown_table([
    {"who": "theirs (Trn2, 1,800 s)", "base": f"{WRITEUP_TRN2['baseline']:.3f}",
     "final": f"{WRITEUP_TRN2['final']:.3f}",
     "gain": f"{theirs:.3f} ({theirs / WRITEUP_TRN2['baseline']:.1%})"},
    {"who": f"ours ({ch.profile.name} profile, {split} split, {n} seeds)",
     "base": f"{b:.4f} ({base[0]['steps']} steps)", "final": f"{f:.4f} ({final[0]['steps']} steps)",
     "gain": f"{-d.delta:.4f} ({-d.delta / b:.1%}), paired {p_paired}"}],
    {"who": "", "base": "baseline", "final": "final", "gain": "gain"})))
goal = 0.20
print(f"goal: {goal:.2f} below the baseline on {split}: {'met' if -d.delta >= goal else 'missed'} at {-d.delta:.4f}")

# %% [markdown]
# The goal was missed: the final is 0.1703 below the baseline on test in the committed runs (385 against 402 steps;
# 0.2013 on validation), against the write-up's 0.300. Their gain came from a larger model trained for 30 minutes on
# web text, where the n-gram mix was worth about 0.007. Here, in three reference minutes on two CPU cores, the gain
# on test at equal budget is five rungs' (the ladder record, each rung's steps against the rung below's):
# torch.compile's extra steps +0.0713 (501 against 402), the bigram table +0.0338 (473 against 501), the n-gram mix
# +0.0520 (375 against 473), the momentum warm-up +0.0019 (375 and 375) and the wider n-gram tables +0.0112 (385
# against 375); the weight average and gated attention, part of their final model, are not shown.

# %% [markdown]
# ## What this chapter found

# %%
from frontier.study import ablation, ladder
from frontier.study.bench_records import load_bench_record
from frontier.study.chapter import machine
from frontier.study.compare import Group, p_text, paired_test
from frontier.study.report import mean_std
from frontier.study.sweep import newest_sweep

P = ch.profile
n = P.seeds
steps = 400 if P.name == "cpu" else 10
base, final = ch.seeds("baseline", n), ch.seeds("final", n)
split = "test" if all(r.get("test_bpb") is not None for r in base + final) else "val"
d = paired_test(*(Group(k, tuple(r[f"{split}_bpb"] for r in rs), (), tuple(r["seed"] for r in rs))
                  for k, rs in (("baseline", base), ("final", final))))
sweep = newest_sweep(ch.root, P.name, ablation.sweep_name(final[0]["recipe"], steps, P.corpus))  # the leave-one-out
worth = {ablation.part_of(r): ablation.part_gain(r) for r in sweep["rows"][1:]}
part = {k: (g, p_text(p)) for k, (g, p, seeds) in worth.items()}  # gain, "p < 0.001"
folder = ch.root / "bench" / P.name
comp = [r for r in (load_bench_record(p) for p in sorted(folder.glob("compressors-*.json")))
        if r["arguments"].get("manifest_hash") == ch.data.manifest_hash] if folder.is_dir() else []
ppmd = next((c[f"{split}_bpb"] for c in (comp[-1]["rows"] if comp else []) if c["compressor"] == "PPMd o16"), None)
fm, fs, _ = mean_std(r[f"{split}_bpb"] for r in final)
p_paired = f"p = {d.p:.4f}" if d.p >= 1e-4 else "p < 0.0001"
record = ladder.latest_ladder_record(P.name, root=ch.root)  # the final's rungs the leave-one-out does not cover
line = {final[0]["recipe"], *ladder.ancestors(final[0]["recipe"])}
covered = {above for part, (_, above) in ladder.part_pairs(final[0]["recipe"]).items() if part != "everything"}
own = [r for r in (record or {}).get("rows", []) if r.get("recipe") in line - covered and r["rung"] != "final"
       and r.get("equal_steps")]
own_text = "".join(
    f" The {r['rung']} over `{r['over']}`: {r['equal_steps']['gain']:+.4f} at "
    f"{ladder.steps_span(r['equal_steps']['steps_seen'])} ({r['verdict'].split(':')[0]})." for r in own)
text = (f"**final = `{final[0]['recipe']}`: {split} {fm:.4f} ± {fs:.4f}** ({n} seeds, {final[0]['steps']} steps) "
        f"against the baseline's {mean_std(r[f'{split}_bpb'] for r in base)[0]:.4f} ({base[0]['steps']} steps): "
        f"{-d.delta:.4f} better (paired {p_paired}); the goal of 0.20 {'met' if -d.delta >= 0.20 else 'missed'}. "
        f"Each part's worth at {steps} steps, removed from the final: "
        + "; ".join(f"the {k} {g:+.4f} ({v})" for k, (g, v) in part.items() if k != "everything") + "."
        + own_text + (f" PPMd o16 given the training text: {split} {ppmd:.4f}." if ppmd is not None else "")
        + f" {P.name} profile, {machine()}.")
box.update(text)
print(f"{len(text)} characters")

# %% [markdown]
# ## Records
#
# The runs, sweeps, ladder, compressors and retrain records this chapter quoted, and the code behind each.

# %% jupyter={"outputs_hidden": true}
from pathlib import Path

from frontier import recipes
from frontier.records import REPO, load_record
from frontier.study import ablation, experiments as ex, ladder
from frontier.study.bench_records import load_bench_record
from frontier.study.replay import stored_check
from frontier.study.sweep import newest_sweep
from frontier.train import cost

P = ch.profile
n = P.seeds
steps = 400 if P.name == "cpu" else 10
final = recipes.get_recipe("final").name
sweeps = [newest_sweep(ch.root, P.name, ablation.sweep_name(r, steps, P.corpus)) for r in dict.fromkeys(("ema", final))]
recs = [r for name in dict.fromkeys(ladder.recipe_name(x.recipe) for x in ladder.LADDER if x.recipe)
        for r in ch.seeds(name, n)]

def checked(run_dir):
    """A leave-one-out run's record with the current code's check of it (the section above replayed it)."""
    d = Path(run_dir) if Path(run_dir).is_absolute() else REPO / run_dir  # stored as `records.repo_named`
    rec = load_record(d)
    return {**rec, "replay": stored_check(d, rec)}


recs += [checked(x["run_dir"]) for sweep in sweeps for row in sweep["rows"] if row["score"] == "val_bpb"
         for x in row["runs"].values()]
recs += [ch.run("gate", s, steps=steps, label=f"gate-{steps}steps") for s in range(n)]
_, batch_runs, replicated = ex.batch_screen(  # the batch sizes' runs, as the section above read them
    lambda s, sz: ch.run("ngram", s, sizes=sz, label=f"ngram-{ex.size_label(sz)}" if sz else None),
    ex.BATCH_SWEEPS.get(P.name, []), n)
recs += [r for v in batch_runs.values() for r in v] + [r for pair in replicated.values() for v in pair for r in v]
recs = list({r["run_dir"]: r for r in recs}.values())
folder = ch.root / "bench" / P.name
benches = [*sweeps, ladder.latest_ladder_record(P.name, root=ch.root)]
benches += [r for r in (load_bench_record(p) for p in sorted(folder.glob("compressors-*.json")))
            if r["arguments"].get("manifest_hash") == ch.data.manifest_hash]
benches += [load_bench_record(p) for p in sorted(folder.glob("retrain-*.json"))]
table = cost.load_table()  # the cost benches the batch sizes bought their steps from
keys = [cost.cost_key(recipes.resolve("ngram", P, vocab_size=ch.data.vocab_size, sizes=sz))
        for sz in ex.BATCH_SWEEPS.get(P.name, [])]
benches += [load_bench_record(REPO / p) for p in sorted({table[k].record for k in keys if k in table})]
ch.records(recs, benches)
