"""Measuring the cost table of the steps rule (`frontier.train.cost`) on this machine, and comparing it with the
committed one: `frontier bench --costs [RECIPES] --profile P [--write-table]`.

Each recipe is measured in turn (`frontier.train.cost.measure_cost`: warm-up steps, then rounds of a probe timing
and timed steps), all of them in one process, the whole list `repeats` times over, interleaved; a recipe's cost is
the median of its repeats. The bench record keeps every timing; `--write-table` writes the costs into the
committed table, each entry naming the record.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from ..data.dataset import profile_dataset
from ..devices import select_device
from ..recipes import RECIPES, resolve
from ..records import repo_named
from .bench_records import bench_record, new_record_path
from ..train.cost import TABLE, StepCost, cost_key, load_table, measure_cost, write_table


def run_cost_bench(recipes: list[str] | None, profile: str, repeats: int = 2, device: str = "cpu",
                   out: str | Path = "runs/bench", command: list[str] | None = None, write: bool = False,
                   table: Path = TABLE, sizes: list[dict] | None = None, log=print) -> dict:
    """Measure the step cost of `recipes` (default: every recipe) at `profile`, or, given `sizes` (profile fields,
    `frontier.study.experiments.size`), of each recipe at each of those sizes other than the profile's own (a size
    screen's runs then buy their steps from the table too); write a bench record under `out`, and with `write` the cost table `table` (default the committed
    one). Returns the record, with the table's cost beside each measured one (`committed_step_s`)."""
    from .experiments import size_label

    recipes = list(recipes or RECIPES)
    path = new_record_path(out, "costs", [profile])
    dev = select_device(device)
    dataset = profile_dataset(profile, log=log)
    own = {r: resolve(r, profile, vocab_size=dataset.vocab_size, clock="steps") for r in recipes}
    cfgs = {} if sizes else own  # with sizes: the recipes at those sizes only (a plain --costs measures their own)
    for r in recipes:
        for sz in sizes or []:
            cfg = resolve(r, profile, vocab_size=dataset.vocab_size, clock="steps", sizes=sz)
            if cost_key(cfg) != cost_key(own[r]):  # the profile's own size is the recipe's own entry: left as it is
                cfgs[f"{r} {size_label(sz)}"] = cfg
    names = list(cfgs)
    measured: dict[str, list] = {r: [] for r in names}
    for rep in range(repeats):
        for r in names:
            log(f"[{rep + 1}/{repeats}] {r}")
            cost, timings = measure_cost(cfgs[r], dataset, dev, log=log)
            measured[r].append({"step_s": cost.step_s, "fixed_s": cost.fixed_s,
                                "count_s_per_token": cost.count_s_per_token, **timings})
    committed = load_table(table)
    rows = []
    for r in names:
        key = cost_key(cfgs[r])
        old = committed.get(key)
        rows.append({"recipe": r, "key": key, "step_s": statistics.median(m["step_s"] for m in measured[r]),
                     "fixed_s": statistics.median(m["fixed_s"] for m in measured[r]),
                     "count_s_per_token": statistics.median(m["count_s_per_token"] for m in measured[r]),
                     "counted_tokens": measured[r][0]["counted_tokens"],
                     "committed_step_s": old.step_s if old else None, "measurements": measured[r]})
    arguments = {"recipes": recipes, "profile": profile, "repeats": repeats, "device": device,
                 "data": dataset.manifest_hash, **({"sizes": sizes} if sizes else {})}
    result = bench_record("costs", arguments, command, "frontier.study.costs.run_cost_bench",
                          {"profile": profile, "costs": rows}, path, cpu=dev.backend == "cpu")
    if write:
        write_table([StepCost(row["key"], cfgs[row["recipe"]].recipe, profile, row["step_s"], row["fixed_s"],
                              repo_named(path), row["count_s_per_token"]) for row in rows], table)
    return result


def format_cost_bench(result: dict) -> str:
    lines = [f"step costs at {result['profile']} (reference ms a step; fixed reference s a run; counting: reference "
             f"s a million tokens of train shards)",
             f"{'recipe':<24} {'here':>9} {'committed':>10} {'here/committed':>15} {'fixed':>7} {'counting':>9}"]
    for row in result["costs"]:
        old = row["committed_step_s"]
        ratio = f"{row['step_s'] / old:.3f}" if old else "-"
        lines.append(f"{row['recipe']:<24} {row['step_s'] * 1e3:>9.2f} {old * 1e3 if old else float('nan'):>10.2f} "
                     f"{ratio:>15} {row['fixed_s']:>7.2f} {row.get('count_s_per_token', 0.0) * 1e6:>9.3f}")
    return "\n".join(lines)
