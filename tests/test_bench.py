import json
import statistics
from pathlib import Path

import pytest

from frontier.cli import main
from frontier.errors import UserError
from frontier.study.bench_records import load_bench_record, new_record_path, write_bench_record
from frontier.study.bench import format_bench, run_bench, summarise

RECORD_KEYS = {"record", "kind", "created", "command", "arguments", "code", "profile", "device", "hardware", "path"}


def test_summarise_takes_the_ratio_of_medians_to_the_first_recipe():
    # Known rounds: b is twice as fast as a by the medians (its one slow round must not count).
    rows = summarise(["a", "b"], [[100.0, 110.0, 90.0], [200.0, 10.0, 220.0]], [[10.0, 9.0, 11.0], [5.0, 100.0, 4.0]])
    assert [r["recipe"] for r in rows] == ["a", "b"]
    assert rows[0]["ratio"] == 1.0
    assert rows[1]["ratio"] == pytest.approx(2.0)  # inverted (0.5), mean-based (~1.3) or min-based (0.11) all miss
    assert (rows[1]["tokens_per_s_min"], rows[1]["tokens_per_s_median"], rows[1]["tokens_per_s_max"]) == (10.0, 200.0, 220.0)
    assert rows[1]["step_ms_median"] == 5.0 and rows[1]["samples"] == [200.0, 10.0, 220.0]


def test_bench_alternates_and_reports_ratio_and_memory(smoke_data, tmp_path):
    res = run_bench(["baseline", "baseline"], profile="smoke", steps=2, repeats=3, device="cpu",
                    data=str(smoke_data.folder), log=lambda m: None, out=tmp_path)
    rec = load_bench_record(res["path"])
    assert rec["path"] == res["path"] and RECORD_KEYS <= rec.keys() and rec["kind"] == "bench"
    for when in ("rounds_start", "rounds_end"):  # the machine's load beside the rounds it may have scattered
        load = rec["load"][when]
        assert load["cores"] >= 1 and (load["load_1m"] is None or load["load_1m"] >= 0), load
    busy = {**rec, "load": {"rounds_start": {"load_1m": 5.0, "cores": 2}, "rounds_end": {"load_1m": 1.0, "cores": 2}}}
    assert format_bench(busy).splitlines()[-1] == ("machine load (1-minute average, the bench's own threads included): "
                                                   "5.00 at the first round, 1.00 after the last, on 2 cores; more than "
                                                   "a core above them: other work shared the cores")
    quiet = {**rec, "load": {"rounds_start": {"load_1m": 2.8, "cores": 2}, "rounds_end": {"load_1m": 2.1, "cores": 2}}}
    assert format_bench(quiet).splitlines()[-1].endswith("on 2 cores")
    rows = rec["rows"]
    assert [r["recipe"] for r in rows] == ["baseline", "baseline"]
    base = statistics.median(rows[0]["samples"])
    for r in rows:
        assert len(r["samples"]) == len(r["step_ms_samples"]) == 3  # one per round
        # the ratio is the quotient of medians of the recorded samples, against the first row
        assert r["ratio"] == pytest.approx(statistics.median(r["samples"]) / base, rel=1e-12)
        assert (r["tokens_per_s_min"], r["tokens_per_s_max"]) == (min(r["samples"]), max(r["samples"]))
        # each round's tokens/s and ms/step describe the same round: tokens/s x s/step = tokens per step
        for tps, ms in zip(r["samples"], r["step_ms_samples"]):
            assert tps * ms / 1000 == pytest.approx(rec["tokens_per_step"], rel=1e-9)
        assert r["peak_mib"] is not None and r["peak_mib"] > 0
    # a recipe against itself: near 1 (a loose band: timing noise stays inside it, units or a wrong row do not)
    assert 1 / 3 < rows[1]["ratio"] < 3
    assert rows[0]["ratio"] == 1.0
    text = format_bench(res)
    assert "ratio" in text and text.count("baseline") == 2


def test_cli_bench_writes_a_new_record_each_run(smoke_data, tmp_path, capsys):
    args = ["bench", "baseline", "--profile", "smoke", "--steps", "1", "--repeats", "2", "--device", "cpu",
            "--data", str(smoke_data.folder), "--out", str(tmp_path)]
    assert main(args) == 0
    assert main(args) == 0
    files = sorted(tmp_path.glob("bench-baseline-*.json"))
    assert len(files) == 2  # the second run wrote beside the first, in the same second or not
    printed = capsys.readouterr().out
    for f in files:
        assert f"bench record: {f}" in printed
        rec = json.loads(f.read_text())
        assert RECORD_KEYS <= rec.keys() and rec["kind"] == "bench" and rec["profile"] == "smoke"
        assert rec["command"][:3] == ["frontier", "bench", "baseline"] and "--out" not in rec["command"]
        assert rec["arguments"]["repeats"] == 2 and len(rec["rows"][0]["samples"]) == 2
        assert {"git_sha", "source_sha256"} <= rec["code"].keys() and "cpu" in rec["hardware"]


def test_cli_bench_table_writes_records_with_every_round(tmp_path, capsys):
    args = ["bench-table", "--profile", "smoke", "--rows-log2", "8,10", "--steps", "1", "--repeats", "2",
            "--out", str(tmp_path)]
    assert main(args) == 0 and main(args) == 0
    files = sorted(tmp_path.glob("bench-table-dense+sparse+torch-sparseadam-*.json"))
    assert len(files) == 2
    rec = load_bench_record(files[0])
    assert RECORD_KEYS <= rec.keys() and rec["kind"] == "bench-table" and rec["positions"] == 8 * 64
    assert [c["rows"] for c in rec["curve"]] == [256, 1024]
    for c in rec["curve"]:
        assert set(c["samples"]) == {"dense", "sparse", "torch-sparseadam"}
        assert all(len(v) == 2 for v in c["samples"].values())
        assert c["dense_ms"] == min(c["samples"]["dense"]) and c["sparse_ms"] == min(c["samples"]["sparse"])
        assert c["torch_sparseadam_ms"] == min(c["samples"]["torch-sparseadam"])
        assert c["ratio"] == pytest.approx(c["dense_ms"] / c["sparse_ms"])
    assert "torch-sparseadam ms" in capsys.readouterr().out


def test_records_are_never_overwritten(tmp_path):
    target = tmp_path / "mine.json"
    assert new_record_path(target, "bench", ["a"]) == target
    write_bench_record({"record": "frontier-bench", "kind": "bench"}, target)
    with pytest.raises(UserError, match="already exists"):
        new_record_path(target, "bench", ["a"])
    with pytest.raises(UserError, match="already exists"):
        write_bench_record({"record": "frontier-bench"}, target)
    first = new_record_path(tmp_path / "d", "bench", ["a", "b"])
    write_bench_record({"record": "frontier-bench"}, first)
    second = new_record_path(tmp_path / "d", "bench", ["a", "b"])
    assert first.name.startswith("bench-a+b-") and second != first and not second.exists()
    (tmp_path / "other.json").write_text("{}")
    with pytest.raises(UserError, match="not a bench record"):
        load_bench_record(tmp_path / "other.json")


def test_a_record_inside_the_repository_keeps_its_path_relative_to_it(tmp_path, monkeypatch):
    from frontier import records

    repo = tmp_path / "repo"
    monkeypatch.setattr(records, "REPO", repo.resolve())  # a checkout elsewhere wrote it
    target = repo / "runs" / "bench" / "cpu" / "book-cpu-1.json"
    rec = {"record": "frontier-bench", "kind": "book"}
    write_bench_record(rec, target)
    assert rec["path"] == str(target)  # the caller still gets where it lies
    assert json.loads(target.read_text())["path"] == "runs/bench/cpu/book-cpu-1.json"
    assert load_bench_record(target)["path"] == str(target)
    outside = tmp_path / "elsewhere.json"
    write_bench_record({"record": "frontier-bench"}, outside)
    assert json.loads(outside.read_text())["path"] == str(outside)


def test_bench_puts_process_counts_side_by_side(smoke_data, tmp_path):
    """`--nproc 1,2`: one job per count (2 under torchrun, data-parallel), their rows in one record."""
    res = run_bench(["baseline"], profile="smoke", steps=1, repeats=2, device="cpu", data=str(smoke_data.folder),
                    memory=False, log=lambda m: None, out=tmp_path, nproc=[1, 2])
    rec = load_bench_record(res["path"])
    rows = rec["rows"]
    assert [(r["recipe"], r["nproc"]) for r in rows] == [("baseline", 1), ("baseline", 2)]
    assert rec["arguments"]["nproc"] == [1, 2] and [j["nproc"] for j in rec["jobs"]] == [1, 2]
    assert rec["jobs"][0]["distributed"] is None and rec["jobs"][1]["distributed"]["world_size"] == 2
    assert rows[0]["ratio"] == 1.0
    assert rows[1]["ratio"] == pytest.approx(rows[1]["tokens_per_s_median"] / rows[0]["tokens_per_s_median"])
    for r in rows:  # tokens/s of the global batch: tokens/s x s/step = the profile's tokens per step
        for tps, ms in zip(r["samples"], r["step_ms_samples"]):
            assert tps * ms / 1000 == pytest.approx(rec["tokens_per_step"], rel=1e-9)
    assert rec["tokens_per_step"] == 8 * 64
    assert "baseline x2" in format_bench(res)


def test_newest_record_reads_the_newest_of_a_kind_and_its_names(tmp_path):
    from frontier.study.bench_records import bench_record, newest_record

    def make(kind, names, created, data):
        rec = bench_record(kind, {"data": data}, ["x"], "f", {"rows": []}, new_record_path(tmp_path, kind, names))
        path = rec["path"]
        rec = json.loads(open(path).read())
        rec["created"] = created  # records made in one second: their order set by hand
        open(path, "w").write(json.dumps(rec))
        return path

    assert newest_record(tmp_path / "missing", "bench") is None
    old = make("bench", ["baseline", "compile"], "2026-12-01T00:00:00+00:00", "a")
    new = make("bench", ["baseline", "compile"], "2026-12-02T00:00:00+00:00", "b")
    make("bench", ["baseline", "compile-opt"], "2026-12-03T00:00:00+00:00", "a")  # other names
    make("compressors", ["cpu"], "2026-12-04T00:00:00+00:00", "a")  # another kind
    (tmp_path / "bench-baseline+compile-20261205-000000.json").write_text("{}")  # not a bench record
    assert newest_record(tmp_path, "bench", ["baseline", "compile"])["path"] == new
    assert newest_record(tmp_path, "bench", ["baseline", "compile"], match=lambda r: r["arguments"]["data"] == "a")["path"] == old
    assert newest_record(tmp_path, "bench")["arguments"]["data"] == "a"  # any names: the compile-opt one, newest
    assert newest_record(tmp_path, "compressors")["kind"] == "compressors"
    assert newest_record(tmp_path, "bench", ["ngram"]) is None
    # two records of one second (the same `created`): the newer is the one named after it, `-2`
    first = Path(make("retrain", ["run"], "2026-12-06T00:00:00+00:00", "a"))
    second = first.with_name(first.stem + "-2.json")  # as `new_record_path` names the next record of that second
    second.write_text(json.dumps({**json.loads(first.read_text()), "arguments": {"data": "b"}}))
    assert newest_record(tmp_path, "retrain")["arguments"]["data"] == "b"
