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
# # Chapter 1: the baseline
#
# The AWS Trainium Frontier gave every entrant one Trn2 chip and 30 minutes of charged training, and scored the
# model on held-out web text in **bits per byte** (lower is better). The write-up this book re-executes took the
# competition's baseline from **1.259** to **0.959** bits per byte on Trn2 over 106 submissions and about 750
# logged runs; the final Phase 1 leaderboard ran from 0.9328 (first) to 0.9554 (tenth). Those are the write-up's
# numbers, measured on Trn2. Everything else in this book is measured by the code in `frontier/` on the machine
# that ran the chapter, and the run records it wrote sit in `runs/` beside the figures.
#
# This chapter sets the stage: the rules, the metric, the data, the baseline model and the clock. It then picks
# a model size for the machine at hand, trains the baseline with several seeds, and puts its score beside what
# classical compressors reach on the same text.

# %% tags=["parameters"]
profile = "cpu"
run_root = "../runs"
figures_dir = "../figures"

# %%
from pathlib import Path

from IPython.display import Markdown, display

from frontier.data.dataset import profile_dataset
from frontier.figures import loss_curve_figure, new_figure, save_figure
from frontier.optim.optimizers import Optimizers
from frontier.profiles import get_profile
from frontier.recipes import resolve
from frontier.study import experiments as ex
from frontier.study import report
from frontier.study.compare import compare, format_comparison
from frontier.study.compressors import compressor_bpb
from frontier.train.bpb import score_text
from frontier.train.trainer import build_model, load_run_model

P = get_profile(profile)
figures = Path(figures_dir)
data = profile_dataset(P)
print(f"profile {P.name}: {P.summary}")
print(ex.code_banner())

# %% [markdown]
# ## The rules
#
# - **Hardware and time.** One Trn2 chip; 1,800 seconds of charged training. Only training steps are charged:
#   the first few steps (compilation and warm-up, up to 5) are free up to a start-up allowance of 900 seconds, and
#   evaluation is free. `frontier.train.clock.BudgetClock` implements exactly this, and every run record stores its
#   charged and uncharged seconds separately.
# - **Data.** ClimbMix web text with a fixed 8,192-token BPE tokenizer; only the training script could change.
# - **Score.** `val_bpb` on a private held-out shard.
#
# The `trn2` profile is that competition. On a laptop we keep the rules and shrink the scale: the `cpu` profile
# gives a few minutes of 2-core CPU time to a model sized for it, trained on text every Python installation
# carries.

# %% [markdown]
# ## The clock: reference seconds
#
# A budget of wall-clock seconds buys as many steps as the machine manages: the same recipe, seed and 180 seconds
# took 358 steps on one day and 220 on another, and a laptop three times faster would get three times the steps
# and numbers that match nothing here. So the `cpu` and `smoke` profiles charge **reference seconds**. A *speed
# probe* (`frontier/train/probes.py`, `gpt-step-1`) is a fixed piece of plain-PyTorch work that stands for a
# training step at the profile's shapes: one transformer block and the output head, forward and backward, with
# its matmuls, elementwise work and softmax in about the baseline step's proportions. Each profile states how
# long the probe took on a named reference machine (`frontier/profiles.py`). A run times the probe before its
# first step and at every eighth of the run (free), and charges each step
#
# $$\text{charged} = \text{wall seconds} \times \frac{\text{reference probe time}}{\text{probe time now}},$$
#
# so on a machine, or in an hour, twice as slow a step is charged half as much, and the budget buys about the same
# steps everywhere. A reference second is a second of the reference machine. The record keeps both clocks
# (`charged_s` in reference seconds, `charged_wall_s` in wall seconds), every probe timing, and a `drifted` flag
# when the probe moved by more than its limit during the run. `frontier clock-check` trains the same recipe at 2
# threads, at 1 thread and beside a busy process, and records the steps and wall seconds side by side.
#
# The probe is never edited (a changed probe is a new probe, and every record names the probe and its source
# hash), and it calls nothing of the package's model or kernels: a faster model still buys more steps. What it
# does not correct: it measures one mix of work, so a machine whose matrix multiplies are fast but whose memory is
# slow (or the other way round) is normalised by that mix, not by the recipe's own; a recipe whose step is mostly
# n-gram table lookups or optimiser bookkeeping gets the probe's ratio, not its own. Nor does it undo a machine's
# speed changing between two probe timings.
#
# Measured on the reference machine (`frontier clock-check baseline ngram-sized --budget 60`, record
# `runs/bench/cpu/clock-check-baseline+ngram-sized-20261203-014131.json`; same seed, 60 reference seconds):
#
# | recipe | 2 threads | 1 thread | 2 threads beside a busy process |
# |---|---|---|---|
# | `baseline` | 127 steps, 59.8 wall s | 136 steps (+7%), 110.6 s | 113 steps (-11%), 182.1 s |
# | `ngram-sized` | 185 steps, 62.5 wall s | 227 steps (+23%), 118.6 s | 177 steps (-4%), 177.5 s |
#
# Under the wall clock the slower runs would have had about 40-70% fewer steps. The probe stands for the
# baseline's step better than for `ngram-sized`'s, part of whose step (the n-gram counting) runs on one thread
# whatever torch's thread count: at 1 thread its step slowed 1.55x while the probe slowed 1.92x, so it was
# under-charged and took 23% more steps. The probe's own noise: one timing varies by about 10% (standard
# deviation over 20 timings in one process); over a 180-second run its timings' later half and earlier half
# differed by 7% (`runs/bench/cpu/clock-check-baseline-20261203-015529.json`).
#
# `trn2` (and `gpu`) keep the competition's wall clock: the competition fixed the hardware and charged wall
# seconds, and its records are comparable only under its own rule. `frontier train --clock wall|reference`
# chooses another clock for any run; a wall-clock record is reused only on hardware like the one that trained it,
# a reference-clock record on any machine where the current code reproduces it.

# %% [markdown]
# ## The data
#
# The embedded corpus is the documentation that ships inside Python: the pydoc topics and the long docstrings of
# the standard library, about 1.7 MB of English prose on Python 3.11. `frontier prepare` splits it by document
# (a seeded hash decides), trains a lossless SentencePiece BPE tokenizer on the training split only, and writes
# token shards in the competition's format with a manifest.

# %%
m = data.manifest
rows = [{"split": s, "documents": m[s]["documents"], "bytes": m[s]["bytes"], "tokens": m[s]["tokens"],
         "bytes_per_token": m[s]["bytes"] / m[s]["tokens"]} for s in ("train", "val")]
display(Markdown(report.markdown_table(rows, ["split", "documents", "bytes", "tokens", "bytes_per_token"],
                                       {"bytes_per_token": ".3f"})))
print(f"Python {m['python_version']}, corpus sha256 {m['sources']['embedded']['sha256'][:16]}..., "
      f"vocabulary {m['tokenizer']['vocab_size']}, manifest {data.manifest_hash}")

# %% [markdown]
# ## The metric: bits per byte
#
# A model assigns each next token a probability; its loss on that token is $-\ln p$ nats. Summed over the whole
# validation split and divided by the bytes of text the tokens stand for, it becomes a rate that does not depend
# on the tokenizer:
#
# $$\text{val\_bpb} = \frac{\sum_t -\ln p(x_t \mid x_{<t})}{\ln 2 \cdot \sum_t \text{bytes}(x_t)}$$
#
# The byte total must be the UTF-8 length of the validation text, exactly. With the competition's convention each
# token id stands for a fixed number of bytes and positions whose target is a special token (the BOS that starts
# each document) count in neither sum. Here is the start of a real validation document, token by token:

# %%
val_text = data.tokenizer.decode(data.val_tokens()[1:400].tolist())
sentence = val_text[: val_text.index(".", 60) + 1] if "." in val_text[60:300] else val_text[:200]
uniform = score_text(None, data.tokenizer, sentence)
print(repr(sentence))
print(f"{len(uniform['rows'])} tokens, {uniform['bytes']} bytes by the tokens, {uniform['utf8_bytes']} bytes of UTF-8")
display(Markdown(report.markdown_table(uniform["rows"][:16], ["text", "token", "bytes"])))

# %% [markdown]
# A model that knows nothing gives every token probability $1/V$: $\ln V$ nats per token. Over these bytes that
# is the bits per byte below. Any model worth training must beat it, and we will come back to this sentence once
# the baseline has trained.

# %%
print(f"uniform model: {uniform['nats']:.1f} nats over {uniform['bytes']} bytes = {uniform['bpb']:.3f} bits per byte")

# %% [markdown]
# ## The baseline model and its optimisers
#
# The competition baseline is a nanochat-style GPT (`frontier/model/gpt.py`): RMSNorm without weights, rotary position
# embeddings, RMS-normalised queries and keys, a ReLU² MLP, logits soft-capped with $c \tanh(z/c)$, and an untied
# embedding and head. Blocks start as the identity (zero output projections). Muon (`frontier/optim/muon.py`) updates
# every matrix inside the blocks; AdamW updates the embedding, the head and any scalars
# (`frontier/optim/optimizers.py`). The learning rate is constant, then decays linearly over the second half of the
# **charged time**: the schedule runs on the clock, not on a step count nobody knows in advance.

# %%
cfg = resolve("baseline", P)
model = build_model(cfg)
opts = Optimizers(model, cfg)
groups = [{"optimiser": "Muon", "group": "matrices", "tensors": len(opts.muon.param_groups[0]["params"]),
           "parameters": sum(p.numel() for p in opts.muon.param_groups[0]["params"]), "lr": opts.muon.param_groups[0]["lr"]}]
groups += [{"optimiser": "AdamW", "group": g["name"], "tensors": len(g["params"]),
            "parameters": sum(p.numel() for p in g["params"]), "lr": g["lr"]} for g in opts.adam.param_groups]
display(Markdown(report.markdown_table(groups, ["optimiser", "group", "tensors", "parameters", "lr"])))
print(f"{cfg.model.n_layer} layers x {cfg.model.n_embd} wide, {cfg.model.n_head} heads, vocabulary {cfg.model.vocab_size}: "
      f"{model.num_params():,} parameters; sequences of {cfg.train.seq_len} x batch {cfg.train.batch_size}; "
      f"budget {cfg.train.budget_s:g} charged seconds")
del model, opts

# %% [markdown]
# ## Choosing a size for this machine
#
# The `trn2` profile is the competition's baseline (depth 10, width 640, about 60M parameters). Two CPU cores
# cannot train that in minutes, so the `cpu` profile's size was chosen by a small sweep: the baseline at several
# depths and widths, one seed each, the profile's budget each. In a fixed budget a smaller model takes more steps;
# the sweep finds where that stops paying.

# %%
sweep, sweep_recs = [], []
for sizes in ex.SIZE_SWEEPS.get(P.name, []):
    rec = ex.run("baseline", P, seed=0, root=run_root, label=ex.size_label(sizes), sizes=sizes)
    sweep_recs.append(rec)
    c = rec["config"]
    sweep.append({"size": ex.size_label(sizes)[5:], "params": rec["params"], "batch": c["train"]["batch_size"],
                  "steps": rec["steps"], "tokens_per_s": round(rec["tokens_per_s"]), "val_bpb": rec["val_bpb"],
                  "code": report.code_of(rec)})
display(Markdown(report.markdown_table(sweep, ["size", "params", "batch", "steps", "tokens_per_s", "val_bpb", "code"])))

# %%
fig, ax = new_figure(6.4, 3.6)
ax.scatter([r["params"] for r in sweep], [r["val_bpb"] for r in sweep])
for r in sweep:
    ax.annotate(r["size"], (r["params"], r["val_bpb"]), fontsize=8, xytext=(4, 4), textcoords="offset points")
ax.set_xscale("log")
ax.set_xlabel("parameters")
ax.set_ylabel("val_bpb (one seed)")
ax.set_title(f"baseline sizes at {P.budget_s:g} charged seconds ({P.name} profile)")
save_figure(fig, figures / f"01_size_sweep_{P.name}.png")
fig

# %% [markdown]
# In the execution committed here the profile's size, 3 layers x 192, scored best; the 4-layer models gained from
# a halved batch (more steps in the budget), and the largest models took too few steps to catch up. One seed
# each, on a machine whose speed moved during the sweep (see the baseline below), so neighbours within a few
# hundredths of each other are not told apart by it.

# %% [markdown]
# ## Training the baseline
#
# The baseline at the profile's size, several seeds. Each run leaves a folder with its record (`result.json`:
# config, hardware, code version, clock, score, loss curve) and its checkpoint. A record written by earlier code
# is quoted only when this code reproduces it (`frontier.study.replay`: its first steps' losses bit for bit, the same
# scorer); the `code` column says which code trained each run and which reproduced it. Seed 0's model is loaded
# further down, and checkpoints are not committed, so seed 0 is trained again where its checkpoint is missing.

# %%
ex.run("baseline", P, seed=0, root=run_root, need_checkpoint=True)
baseline = ex.seeds("baseline", P, root=run_root)
display(Markdown(report.runs_table(baseline)))

# %%
fig = loss_curve_figure(baseline, smooth=5)
fig.axes[0].set_title(f"baseline, {P.name} profile: training loss against charged time")
save_figure(fig, figures / f"01_baseline_loss_{P.name}.png")
fig

# %%
bpb = [r["val_bpb"] for r in baseline]
tok_s = [r["tokens_per_s"] for r in baseline]
hw = baseline[0]["hardware"]
print(f"baseline val_bpb: {report.pm(bpb)}")
print(f"throughput: {report.pm(tok_s, 0)} tokens per charged second")
print(f"hardware: {hw['cpu']}, {hw['cpu_cores']} cores, {hw['torch_threads']} torch threads, torch {hw['torch']}")

# %% [markdown]
# **Read that spread with the steps beside it.** In the execution committed here, seed 0 was trained again with
# this execution (its checkpoint is needed below), while seeds 1 and 2 are the ladder's runs (chapter 07), trained
# in an earlier session: the same model and budget took 358 steps in one and 220 and 249 in the other (the table
# above), and a run with more steps scores better. Even inside this execution the machine's speed moved: the size
# sweep's `3x192` row is the same configuration and seed as baseline seed 0, trained about twenty minutes earlier,
# and it took 313 steps. So most of this spread is the machine's speed, not the seed; chapter 05 measures the
# sources of noise separately, and chapter 07's ladder trains every rung in one session for that reason.

# %% [markdown]
# Back to the validation sentence, token by token: the uniform model against the trained baseline (seed 0).

# %%
model, _ = load_run_model(baseline[0]["run_dir"])
trained = score_text(model, data.tokenizer, sentence, seq_len=P.seq_len)
rows = [dict(r, uniform_bits=u["bits"]) for r, u in zip(trained["rows"], uniform["rows"])]
display(Markdown(report.markdown_table(rows[:16], {"text": "text", "bytes": "bytes", "uniform_bits": "bits (uniform)",
                                                   "bits": "bits (baseline)"}, {"uniform_bits": ".2f", "bits": ".2f"})))
print(f"this sentence: {trained['bpb']:.3f} bits per byte under the baseline, {uniform['bpb']:.3f} under the uniform model")

# %% [markdown]
# ## Against classical compressors
#
# How good is that? A compressor is a model of text too. Given the training text as context, as the model is,
# its cost for the validation text is $8 \cdot (|C(\text{train} + \text{val})| - |C(\text{train})|)$ bits over
# the same bytes. PPMd (the context model in 7z) predicts each byte from up to 16 previous ones.

# %%
comp = compressor_bpb(data)
rows = comp + [{"compressor": f"baseline transformer ({P.name}, mean of {len(bpb)})", "val_bpb": sum(bpb) / len(bpb),
                "val_bpb_alone": None, "context_bytes": m["train"]["bytes"], "val_bytes": baseline[0]["val_bytes"]}]
display(Markdown(report.markdown_table(rows, {"compressor": "model", "val_bpb": "val_bpb (train as context)",
                                              "val_bpb_alone": "val_bpb (val alone)", "val_bytes": "val bytes"})))

# %% [markdown]
# ## What this chapter measured
#
# The numbers below are computed from the run records above when the chapter runs.

# %%
best_comp = min(comp, key=lambda r: r["val_bpb"])
display(Markdown(
    f"- Baseline (`{P.name}` profile, {P.budget_s:g} charged seconds, {len(bpb)} seeds): **val_bpb {report.pm(bpb)}**, "
    f"{report.pm(tok_s, 0)} tokens/s on {hw['cpu']} ({hw['cpu_cores']} cores).\n"
    f"- Best classical compressor: {best_comp['compressor']} at {best_comp['val_bpb']:.4f} bits per byte with the "
    f"training text as context.\n"
    f"- The write-up's Trn2 baseline scored 1.259 on ClimbMix with a 60M-parameter model; these numbers are a "
    f"different machine, model size and corpus, and are comparable only with each other.\n"
    f"- The next chapters change one thing at a time and compare against these runs with `frontier compare`.\n"
    f"- Code behind these numbers:\n" + report.provenance(baseline + [r for r in sweep_recs])
))
