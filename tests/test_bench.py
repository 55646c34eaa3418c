from frontier.bench import format_bench, run_bench


def test_bench_alternates_and_reports_ratio_and_memory(smoke_data):
    res = run_bench(["baseline", "baseline"], profile="smoke", steps=2, repeats=2, device="cpu",
                    data=str(smoke_data.folder), log=lambda m: None)
    rows = res["rows"]
    assert [r["recipe"] for r in rows] == ["baseline", "baseline"]
    assert rows[0]["ratio"] == 1.0 and rows[1]["ratio"] > 0
    for r in rows:
        assert len(r["samples"]) == 2 and r["tokens_per_s_min"] <= r["tokens_per_s_median"] <= r["tokens_per_s_max"]
        assert r["peak_mib"] is not None and r["peak_mib"] > 0
    text = format_bench(res)
    assert "ratio" in text and text.count("baseline") == 2
