"""`frontier bench-ngram`: the record it writes and what it says about the two countings."""

import pytest

from frontier.cli import main
from frontier.errors import UserError
from frontier.study.bench_records import load_bench_record
from frontier.study.bench_ngram import run_ngram_bench


@pytest.mark.parametrize("check_bits", [None, 31])
def test_ngram_bench_record(tmp_path, smoke_data, check_bits):
    res = run_ngram_bench("smoke", check_bits=check_bits, repeats=2, data=str(smoke_data.folder), log=lambda m: None,
                          out=tmp_path)
    rec = load_bench_record(res["path"])
    assert rec["kind"] == "bench-ngram" and rec["record"] == "frontier-bench" and rec["code"]
    assert rec["identical"] is True  # the NumPy counting gives the torch counting's tables, every buffer
    assert rec["ngram"]["check_bits"] == (check_bits or 0) and rec["ngram"]["max_order"] == 16
    assert rec["tokens"] >= sum(len(s) for s in smoke_data.train_tokens()) - 2 * 65  # every window counted
    numpy_row, serial_row, torch_row = rec["rows"]
    assert [r["variant"] for r in rec["rows"]] == ["numpy", "numpy-serial", "torch"]
    for row in rec["rows"]:
        assert len(row["seconds"]) == len(row["tokens_per_s"]) == 2 and row["tokens_per_s_median"] > 0
        assert row["tokens_per_s"] == pytest.approx([rec["tokens"] / s for s in row["seconds"]])
    assert numpy_row["ratio"] == pytest.approx(numpy_row["tokens_per_s_median"] / torch_row["tokens_per_s_median"])
    assert torch_row["ratio"] == 1.0


def test_ngram_bench_on_the_command_line(tmp_path, smoke_data, capsys):
    out = tmp_path / "rec.json"
    assert main(["bench-ngram", "--profile", "smoke", "--data", str(smoke_data.folder), "--repeats", "1",
                 "--no-reference", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "\nnumpy " in text and "\ntorch " not in text and f"bench record: {out}" in text
    rec = load_bench_record(out)
    assert [r["variant"] for r in rec["rows"]] == ["numpy", "numpy-serial"] and rec["identical"] is True
    assert rec["command"][:2] == ["frontier", "bench-ngram"] and "--no-reference" in rec["command"]
    with pytest.raises(UserError, match="no n-gram model"):
        run_ngram_bench("smoke", recipe="baseline", data=str(smoke_data.folder), log=lambda m: None)
