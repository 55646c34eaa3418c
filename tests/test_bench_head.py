"""`frontier bench-head`: the fused head op against plain PyTorch, and the bench's RECIPE@IMPL rows."""

import pytest
import torch
import torch.nn.functional as F

from frontier.cli import main
from frontier.errors import UserError
from frontier.study.bench_records import load_bench_record
from frontier.study.bench import run_bench
from frontier.study.bench_head import agreement, make_inputs, peak_memory_child, plain_head_ce, run_head_bench


def test_plain_head_is_softcapped_cross_entropy_with_the_bias():
    x = make_inputs(32, 16, 50, bias=True)
    z = (15.0 * torch.tanh(x["hidden"] @ x["w"].T / 15.0) + x["bias_row"]).detach()
    for n in range(32):  # one correction at a time: a token picked twice gets both
        for e in range(x["bias_tokens"].size(1)):
            z[n, x["bias_tokens"][n, e]] += x["bias_values"][n, e]
    want = F.cross_entropy(z, x["targets"])
    got = plain_head_ce(x["hidden"], x["w"], x["targets"], 15.0, x["bias_row"], x["bias_tokens"], x["bias_values"])
    assert torch.allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("bias", [False, True])
def test_fused_and_plain_agree_on_loss_and_every_gradient(bias):
    assert agreement(300, 24, 70, bias) < 1e-5


def test_the_memory_child_reports_more_for_whole_logits():
    # 16,384 x 4,096 logits: 256 MiB whole (and autograd keeps more); the fused op holds chunks of 4,096 rows
    plain = peak_memory_child("plain", 16384, 32, 4096, False)
    fused = peak_memory_child("fused", 16384, 32, 4096, False)
    assert plain["extra_peak_mib"] > 256 and plain["extra_peak_mib"] > 1.5 * fused["extra_peak_mib"]


def test_head_bench_record(tmp_path):
    res = run_head_bench(["smoke"], steps=1, repeats=2, memory=False, log=lambda *a: None, out=tmp_path)
    rec = load_bench_record(res["path"])
    assert rec["kind"] == "bench-head" and [c["bias"] for c in rec["cases"]] == [False, True]
    for c in rec["cases"]:
        assert len(c["ms"]["plain"]) == len(c["ms"]["fused"]) == 2
        assert c["time_ratio"] == pytest.approx(c["ms_median"]["fused"] / c["ms_median"]["plain"])
        assert c["positions"] == 8 * 64 and c["max_rel_diff"] < 1e-5


def test_bench_rows_say_which_implementation_ran(smoke_data, tmp_path):
    res = run_bench(["baseline", "baseline@interpreter"], profile="smoke", steps=1, repeats=1, device="cpu",
                    data=str(smoke_data.folder), memory=False, log=lambda m: None, out=tmp_path)
    ref, interp = res["rows"]
    paths = {"head_softcap_cross_entropy_logits"}  # the head's backward: logits kept or recomputed, not an impl
    assert {i for op, impls in ref["kernel_calls"].items() if op not in paths for i in impls} == {"reference"}
    assert {i for op, impls in interp["kernel_calls"].items() if op not in paths for i in impls} == {"interpreter"}
    assert ref["kernel_calls"]["head_softcap_cross_entropy_logits"] == {"kept": 1}  # smoke logits fit the budget
    assert interp["kernel_calls"]["head_softcap_cross_entropy_logits"] == {"recomputed": 1}  # a kernel recomputes
    assert interp["kernel_calls"]["head_softcap_cross_entropy"]["interpreter"] == 1  # one timed step
    with pytest.raises(UserError, match="unknown kernel implementation"):
        run_bench(["baseline@fast"], profile="smoke", steps=1, repeats=1, device="cpu", data=str(smoke_data.folder),
                  memory=False, log=lambda m: None)


def test_bench_refuses_kernels_that_cannot_run(capsys):
    assert main(["bench", "baseline", "--profile", "smoke", "--kernels", "nki", "--no-memory"]) == 2
    assert "--kernels nki cannot run here" in capsys.readouterr().err


def test_bench_head_cli(tmp_path, capsys):
    assert main(["bench-head", "--profiles", "smoke", "--repeats", "1", "--no-memory", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "n-gram bias off" in out and "n-gram bias on" in out and "bench record:" in out
    assert main(["bench-head", "--profiles", "laptop"]) == 2
