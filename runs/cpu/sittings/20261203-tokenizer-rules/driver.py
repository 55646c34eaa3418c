# Issue 25 (2026-12-03, fifth session): the tokenizer's rule for which characters get a piece of their own, measured
# on the embedded corpus (English prose, few distinct characters) and on a many-character corpus prepared as a new
# user would (Debian's French, Russian, Japanese and Chinese manual pages gathered into a folder:
# `apt-get install manpages-fr manpages-ru manpages-ja manpages-zh`, then
# `python -m frontier.study.tokenizer_rules --gather-manpages DIR`). Four rules, vocabulary 1,024, bytes per token
# and the baseline's val_bpb after 300 steps (seed 0). One one-thread worker per corpus (step-limited runs are
# nearly deterministic); each writes a bench record `tokenizer-rules-*.json` to runs/cpu/bench/.
import multiprocessing as mp
import time
from pathlib import Path

MANPAGES = Path("~/.cache/frontier/manpages").expanduser()
RULE_NAMES = ("every character (earlier)", "cover 99.95%", "cover 99.9%", "at most a quarter")


def job(corpus):
    import torch
    torch.set_num_threads(1)
    from frontier.study.tokenizer_rules import RULES, format_row, run_rule_study
    t = time.time()
    rec = run_rule_study([corpus], rules={k: RULES[k] for k in RULE_NAMES}, vocab_size=1024, recipe="baseline",
                         profile="cpu", steps=300, seeds=(0,), root="runs", out="runs/cpu/bench",
                         log=lambda *a: None)
    return "\n".join(format_row(r) for r in rec["rows"]) + f"\n{rec['path']} ({time.time() - t:.0f} s)"


if __name__ == "__main__":
    from frontier.study.tokenizer_rules import gather_manpages
    if not MANPAGES.is_dir():
        print(f"{gather_manpages(MANPAGES)} manual pages gathered into {MANPAGES}", flush=True)
    with mp.get_context("spawn").Pool(2, maxtasksperchild=1) as pool:
        for out in pool.imap_unordered(job, ["embedded", str(MANPAGES)]):
            print(time.strftime("%H:%M:%S"), out, flush=True)
