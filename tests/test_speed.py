"""frontier bench-versions and profile-step (frontier/study/speed.py): argument errors in one line, the alternation
of versions and the medians and ratios it records (on stand-in checkouts whose `frontier bench` writes a known
record, so no timing is asserted), and the profile's op groups."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from frontier.cli import main
from frontier.errors import UserError
from frontier.study import speed

FAKE_MAIN = textwrap.dedent('''
    import json, sys
    from pathlib import Path
    RECIPES = {recipes!r}
    TOKENS = {tokens!r}
    args = sys.argv[1:]
    if args[0] == "recipes":
        for r in RECIPES:
            print(f"{{r:<18}} a recipe")
        sys.exit(0)
    if "--help" in args:
        print("usage: frontier bench [--no-memory]" if {no_memory!r} else "usage: frontier bench")
        sys.exit(0)
    out = Path(args[args.index("--out") + 1])
    names = [a for a in args[1:args.index("--profile")]]
    log = Path(__file__).parent.parent / "calls.log"
    with open(log, "a") as fh:
        fh.write(" ".join(args) + "\\n")
    rows = [{{"recipe": r, "samples": [TOKENS[r], TOKENS[r] + 2], "tokens_per_s_median": TOKENS[r] + 1}} for r in names]
    out.write_text(json.dumps({{"record": "frontier-bench", "rows": rows, "code": {{"commit": "fake"}}}}))
''')


def fake_checkout(root, name, recipes, tokens, no_memory=True):
    folder = root / name
    (folder / "frontier").mkdir(parents=True)
    (folder / "frontier" / "__init__.py").write_text("")
    (folder / "frontier" / "__main__.py").write_text(FAKE_MAIN.format(recipes=recipes, tokens=tokens,
                                                                      no_memory=no_memory))
    return folder


def test_versions_alternate_and_record_medians_ratios_and_absent_recipes(tmp_path):
    a = fake_checkout(tmp_path, "a", ["baseline", "compile"], {"baseline": 100, "compile": 200}, no_memory=False)
    b = fake_checkout(tmp_path, "b", ["baseline", "compile", "final"], {"baseline": 150, "compile": 300, "final": 50})
    rec = speed.run_bench_versions([str(a), str(b)], ["baseline", "compile", "final"], steps=1, repeats=1,
                                   rounds=3, out=tmp_path / "rec", log=lambda *x: None)
    order = [e["version"] for e in rec["executions"]]
    assert order == [str(a), str(b)] * 3  # A B A B A B
    calls_a, calls_b = ((folder / "calls.log").read_text().splitlines() for folder in (a, b))
    assert len(calls_a) == len(calls_b) == 3
    assert "--no-memory" not in calls_a[0] and "--no-memory" in calls_b[0]  # each checkout's own options
    assert "final" not in calls_a[0] and "final" in calls_b[0]
    table = {row["recipe"]: row["versions"] for row in rec["table"]}
    assert table["baseline"][str(a)]["median"] == 101 and table["baseline"][str(b)]["ratio"] == pytest.approx(151 / 101)
    assert table["final"][str(a)]["median"] is None and table["final"][str(a)]["ratio"] is None
    assert rec["versions"][0]["absent"] == ["final"]
    saved = json.loads(open(rec["path"]).read())
    assert saved["kind"] == "bench-versions" and saved["code"] and saved["table"] == rec["table"]
    assert "absent" in speed.format_versions(rec)


@pytest.mark.parametrize("argv, message", [
    (["HEAD"], "compares versions: got 1"),
    (["HEAD", "HEAD"], "named twice"),
    (["HEAD", "no-such-commit-xyz"], "neither a checkout folder nor a commit"),
    (["HEAD", "{tmp}"], "not a checkout of frontier"),
])
def test_bench_versions_refuses_bad_arguments_in_one_line(argv, message, tmp_path, capsys):
    argv = [a.format(tmp=tmp_path) for a in argv]
    assert main(["bench-versions", *argv, "--recipes", "baseline", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_bench_versions_needs_recipes_and_positive_counts():
    with pytest.raises(UserError, match="no recipes"):
        speed.check_arguments(["a", "b"], [], 1, 1, 1)
    with pytest.raises(UserError, match="--rounds 0"):
        speed.check_arguments(["a", "b"], ["baseline"], 0, 1, 1)


def test_a_version_that_knows_none_of_the_recipes_is_refused(tmp_path):
    a = fake_checkout(tmp_path, "a", ["baseline"], {"baseline": 1})
    b = fake_checkout(tmp_path, "b", ["compile"], {"compile": 1})
    with pytest.raises(UserError, match="knows none of baseline"):
        speed.run_bench_versions([str(a), str(b)], ["baseline"], rounds=1, log=lambda *x: None)


def test_op_groups():
    assert speed.op_group("aten::mm") == speed.op_group("aten::baddbmm") == "matrix multiplies"
    assert speed.op_group("aten::_scaled_dot_product_flash_attention_for_cpu") == "attention (sdpa)"
    assert speed.op_group("frontier::rmsnorm") == speed.op_group("GeneratedBackwardFor_frontier_rotary_default")
    assert speed.op_group("aten::tanh") == "other aten (elementwise, reductions)"
    assert speed.op_group("Torch-Compiled Region: 0/0") == "compiled graphs (fused kernels, bookkeeping)"


def test_profile_step_writes_a_record_with_shares_that_sum_to_one(tmp_path, capsys):
    assert main(["profile-step", "baseline", "--profile", "smoke", "--steps", "1", "--out", str(tmp_path / "p.json")]) == 0
    rec = json.loads((tmp_path / "p.json").read_text())
    assert rec["kind"] == "profile-step" and rec["recipe"] == "baseline"
    assert sum(g["share"] for g in rec["groups"]) == pytest.approx(1.0)
    assert 0 < rec["matmul_share"] < 1 and rec["kernel_calls"]["rmsnorm"] == {"reference": 4 * 2 + 2}
    assert "matrix multiplies" in capsys.readouterr().out


def test_a_kernel_handed_the_references_kept_logits_recomputes_them():
    # the roofline replays a reference call's arguments (kept tanh included) through the interpreter: it must run
    import torch
    from frontier.kernels import ops
    torch.manual_seed(0)
    n, d, v = 8, 16, 32
    h, w = torch.randn(n, d), torch.randn(v, d) * 0.1
    targets = torch.randint(0, v, (n,))
    loss, lse, kept = ops._head_ce(h, w, targets, 30.0, "reference", None, None, None, None)
    assert kept.numel() == n * v  # small logits are kept by the reference
    ops.reset_calls()
    ref = ops._head_ce_backward(h, w, targets, lse, torch.ones(n), kept, 30.0, "reference", None, None, None, None)
    got = ops._head_ce_backward(h, w, targets, lse, torch.ones(n), kept, 30.0, "interpreter", None, None, None, None)
    # the kernels multiply in bf16 (fp32 accumulation): agreement to bf16 precision
    assert torch.allclose(ref[0], got[0], rtol=2e-2, atol=2e-3) and torch.allclose(ref[1], got[1], rtol=2e-2, atol=2e-3)
    assert ops.calls()[ops.LOGITS] == {"kept": 1, "recomputed": 1}


def test_versions_table_keeps_cells_apart_when_they_are_wider_than_the_names():
    """Short version names (commits) and five-digit tokens/s with a ratio: every cell still has spaces before it."""
    cell = {"median": 11_071.0, "ratio": 1.45}
    rec = {"profile": "cpu", "rounds": 3, "repeats": 1, "steps": 8,
           "versions": [{"spec": "0fa2235"}, {"spec": "dfc55dc"}, {"spec": "ab2aa8c"}],
           "table": [{"recipe": "compile", "versions": {s: dict(cell) for s in ("0fa2235", "dfc55dc", "ab2aa8c")}}]}
    row = speed.format_versions(rec).splitlines()[-1]
    assert row.split() == ["compile"] + ["11,071", "(1.45x)"] * 3
    assert ")11," not in row
