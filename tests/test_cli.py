import subprocess
import sys

import numpy as np
import pytest


def run_cli(*args, timeout=120):
    p = subprocess.run([sys.executable, "-m", "frontier", *args], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def main_cli(capsys, *args):
    """The command in this process (what `python -m frontier` runs, without starting Python again): its exit status,
    stdout and stderr."""
    from frontier.cli import main

    try:
        code = main(list(args))
    except SystemExit as e:  # argparse
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, err, *words):
    assert code == 2, err
    lines = [l for l in err.strip().splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    for w in words:
        assert w in lines[0], (w, lines[0])


def test_help_everywhere(capsys):
    from frontier.cli import main

    code, out, _ = run_cli("--help")  # once as a user runs it
    assert code == 0 and "usage:" in out
    for cmd in [["prepare"], ["train"], ["eval"], ["compare"], ["book"], ["bench"], ["recipes"], ["profiles"],
                ["ngram-orders"], ["bench-ngram"]]:  # the rest in this process: argparse's help exits 0
        with pytest.raises(SystemExit) as done:
            main([*cmd, "--help"])
        assert done.value.code == 0 and "usage:" in capsys.readouterr().out, cmd


def test_recipes_and_profiles_list_one_line_each():
    code, out, _ = run_cli("recipes")
    assert code == 0 and out.splitlines()[0].startswith("baseline")
    code, out, _ = run_cli("profiles")
    assert code == 0 and {l.split()[0] for l in out.splitlines()} == {"smoke", "cpu", "gpu", "trn2", "trn2-dry"}


def test_prepare_train_eval_compare_on_own_text(tmp_path, corpus_dir, capsys):
    data = tmp_path / "data"
    code, out, err = run_cli("prepare", "--out", str(data), "--text", str(corpus_dir), "--vocab-size", "512")
    assert code == 0, err
    runs = []
    for seed in (0, 1):
        run = tmp_path / f"run{seed}"
        code, out, err = run_cli("train", "--recipe", "baseline", "--profile", "smoke", "--data", str(data),
                                 "--steps", "5", "--seed", str(seed), "--out", str(run), "--device", "cpu")
        assert code == 0, err
        last = out.strip().splitlines()[-1]
        assert last.startswith("val_bpb=") and float(last.split("=")[1]) > 0
        runs.append(str(run))
    code, out, err = main_cli(capsys, "eval", "--run", runs[0], "--device", "cpu")  # in this process: faster
    assert code == 0, err
    assert out.strip().splitlines()[-1] == last.replace(last, out.strip().splitlines()[-1])
    import json

    rec = json.loads((tmp_path / "run0" / "result.json").read_text())
    assert abs(float(out.strip().splitlines()[-1].split("=")[1]) - rec["val_bpb"]) < 1e-6
    code, out, err = main_cli(capsys, "compare", *runs)
    assert code == 0, err
    assert "baseline" in out and "  2 " in out


@pytest.fixture
def bad_shard_data(tmp_path, smoke_data):
    import shutil

    d = tmp_path / "bad"
    shutil.copytree(smoke_data.folder, d)
    shard = d / "train_000000.bin"
    shard.write_bytes(shard.read_bytes()[:-10])
    return d


def test_bad_input_one_line_exit_2(tmp_path, smoke_data, bad_shard_data, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "afile").write_text("")
    sd = str(smoke_data.folder)
    cases = [
        (["train", "--recipe", "nope", "--profile", "smoke", "--data", sd], ["unknown recipe", "frontier recipes"]),
        (["train", "--recipe", "baseline", "--profile", "huge", "--data", sd], ["unknown profile"]),
        (["train", "--recipe", "baseline", "--profile", "trn2", "--data", sd], ["'trn2' fixes the vocabulary at 8192",
                                                                              "512-token", "--profile trn2"]),
        (["train", "--recipe", "baseline", "--profile", "smoke", "--data", str(tmp_path / "nope")], ["does not exist"]),
        (["train", "--recipe", "baseline", "--profile", "smoke", "--data", str(bad_shard_data)], ["train_000000.bin"]),
        (["train", "--recipe", "baseline", "--profile", "smoke", "--data", sd, "--out", str(tmp_path / "afile" / "r")], ["cannot write"]),
        (["prepare", "--out", str(tmp_path / "o"), "--text", str(tmp_path / "empty")], ["holds no .txt"]),
        (["prepare", "--out", str(tmp_path / "o"), "--text", str(tmp_path / "missing")], ["does not exist"]),
        (["train", "--recipe", "baseline", "--profile", "smoke", "--data", sd, "--ngram", "slots=8"],
         ["has no n-gram model to set"]),
        (["train", "--recipe", "ngram", "--profile", "smoke", "--data", sd, "--ngram", "slots=abc"],
         ["n-gram slots 'abc'", "whole number"]),
        (["train", "--recipe", "ngram", "--profile", "smoke", "--data", sd, "--ngram", "colour=3"],
         ["no setting colour"]),
        (["train", "--recipe", "ngram", "--profile", "smoke", "--data", sd, "--ngram", "slots"], ["FIELD=VALUE"]),
        (["prepare", "--out", str(tmp_path / "o"), "--corpus", "stdlib-source", "--text", str(tmp_path / "empty")],
         ["both --corpus"]),
        (["eval", "--run", str(tmp_path / "empty")], ["no run record"]),
        (["compare", str(tmp_path / "empty")], ["no run record"]),
    ]
    for i, (args, words) in enumerate(cases):  # the first as a user runs it, the rest in this process
        code, out, err = run_cli(*args) if i == 0 else main_cli(capsys, *args)
        assert_one_line_error(code, err, *words)


def test_bad_arguments_are_one_line_too(smoke_data, capsys):
    code, out, err = run_cli("train", "--recipe", "baseline", "--profile", "smoke", "--budget", "0")  # a real call
    assert_one_line_error(code, err, "must be positive", "--help")
    code, out, err = main_cli(capsys, "train", "--recipe", "baseline", "--profile", "smoke", "--budget", "-5")
    assert_one_line_error(code, err, "must be positive", "--help")
    code, out, err = main_cli(capsys, "train", "--recipe", "baseline", "--steps", "10", "--budget", "5")
    assert_one_line_error(code, err, "not allowed with")
    code, out, err = main_cli(capsys, "frobnicate")
    assert_one_line_error(code, err, "invalid choice")
    code, out, err = main_cli(capsys, "bench", "ngram", "--batches")
    assert_one_line_error(code, err, "--batches chooses what --costs measures", "add --costs")
    code, out, err = main_cli(capsys, "bench", "--costs", "--batches", "--profile", "gpu")
    assert_one_line_error(code, err, "profile 'gpu' has no batch sizes to screen")
    code, out, err = main_cli(capsys, "kernels", "--census", "smoke", "--ops", "bogus")
    assert_one_line_error(code, err, "no op named bogus", "choose among rmsnorm")
    for flag, value, mode in (("--ops", "rmsnorm", "--census"), ("--tokens", "5", "--accuracy"),
                              ("--layers", "2", "--roofline"), ("--width", "64", "--roofline")):
        code, out, err = main_cli(capsys, "kernels", flag, value)
        assert_one_line_error(code, err, f"{flag} chooses what {mode} measures", f"add {mode} PROFILE, or drop {flag}")
    code, out, err = main_cli(capsys, "bench", "--costs", "--batches", "0", "--profile", "smoke")
    assert_one_line_error(code, err, "a batch size is a positive number of sequences", "--batches 8 32")


def test_bench_table_prints_dense_against_sparse(tmp_path):
    code, out, err = run_cli("bench-table", "--profile", "smoke", "--rows-log2", "8,12", "--steps", "1", "--repeats", "1",
                             "--out", str(tmp_path))
    assert code == 0, err
    rows = [l.split() for l in out.splitlines() if l.strip().startswith("2^")]
    assert [r[0] for r in rows] == ["2^8", "2^12"] and all(r[-1].endswith("x") and float(r[1]) > 0 for r in rows)
    code, out, err = run_cli("bench-table", "--rows-log2", "a,b")
    assert_one_line_error(code, err, "--rows-log2")


# ----------------------------------------------------------------------------- the vocabulary belongs to the data


def test_train_builds_the_model_with_the_data_vocabulary(tmp_path, corpus_dir):
    data, run = tmp_path / "data", tmp_path / "run"
    code, out, err = run_cli("prepare", "--out", str(data), "--text", str(corpus_dir), "--vocab-size", "384")
    assert code == 0 and "vocabulary 384" in out, err
    code, out, err = run_cli("train", "--recipe", "baseline", "--profile", "smoke", "--data", str(data),
                             "--steps", "2", "--out", str(run), "--device", "cpu")
    assert code == 0, err
    assert out.strip().splitlines()[-1].startswith("val_bpb=")
    import json

    rec = json.loads((run / "result.json").read_text())
    assert rec["config"]["model"]["vocab_size"] == 384 and rec["config"]["profile"] == "smoke"


def test_prepare_steps_down_a_default_vocabulary_but_not_an_explicit_or_fixed_one(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for i, t in enumerate(["hello world, this is a tiny text. " * 3, "another small document about nothing."]):
        (src / f"{i}.txt").write_text(t)
    code, out, err = run_cli("prepare", "--out", str(tmp_path / "a"), "--text", str(src), "--profile", "smoke")
    assert code == 0, err
    largest = int(out.split("vocabulary ")[-1].split(",")[0])
    assert 258 < largest < 512 and f"a vocabulary of 512; using {largest}, the largest that works" in out
    code, out, err = run_cli("prepare", "--out", str(tmp_path / "b"), "--text", str(src), "--vocab-size", "512")
    assert_one_line_error(code, err, "too small for a vocabulary of 512", f"the largest that works is {largest}",
                          f"--vocab-size {largest}")
    code, out, err = run_cli("prepare", "--out", str(tmp_path / "c"), "--text", str(src), "--profile", "trn2")
    assert_one_line_error(code, err, "too small for a vocabulary of 8192", "the largest that works is")
    assert not (tmp_path / "b").exists() and not (tmp_path / "c").exists()


def test_resolve_takes_the_data_vocabulary_unless_the_profile_fixes_it():
    from frontier.errors import UserError
    from frontier.profiles import PROFILES
    from frontier.recipes import RECIPES, resolve

    for r in RECIPES:
        for p in PROFILES.values():  # the embedded corpus at the profile's vocabulary: the same config as ever
            assert resolve(r, p, vocab_size=p.vocab_size).digest() == resolve(r, p).digest()
    # as in runs/cpu/baseline/*/result.json, which ran under the wall clock
    assert resolve("baseline", "cpu", clock="wall").digest() == "b206d3b692965179"
    assert resolve("baseline", "smoke", vocab_size=384).model.vocab_size == 384
    assert resolve("ngram", "gpu", vocab_size=1024).model.vocab_size == 1024
    assert [p.name for p in PROFILES.values() if p.fixed_vocab] == ["trn2", "trn2-dry"]
    with pytest.raises(UserError) as e:
        resolve("baseline", "trn2", vocab_size=1024)
    assert "\n" not in str(e.value) and "8192" in str(e.value) and "1024" in str(e.value)


def test_ngram_flags_change_the_recorded_config(tmp_path, smoke_data):
    import json

    out = tmp_path / "run"
    code, stdout, err = run_cli("train", "--recipe", "ngram-only", "--profile", "smoke", "--data",
                                str(smoke_data.folder), "--steps", "2", "--no-progress", "--out", str(out),
                                "--ngram", "slots=8", "--ngram", "smoothing=absolute", "--ngram", "mixer=counts")
    assert code == 0, err
    rec = json.loads((out / "result.json").read_text())
    ng = rec["config"]["model"]["ngram"]
    assert (ng["slots"], ng["smoothing"], ng["mixer"]) == (8, "absolute", "counts")
    assert "--ngram" in rec["command"] and "slots=8" in rec["command"]


def test_the_core_commands_load_nothing_of_the_study(tmp_path, corpus_dir, smoke_data):
    """prepare, train (a variant, whose label the core names), eval, recipes and profiles run without importing
    `frontier.study`."""
    code = f"""
import sys
from frontier.cli import main
run, data = {str(tmp_path / "run")!r}, {str(smoke_data.folder)!r}
assert main(["recipes"]) == main(["profiles"]) == 0
assert main(["prepare", "--out", {str(tmp_path / "data")!r}, "--text", {str(corpus_dir)!r}, "--vocab-size", "512"]) == 0
assert main(["train", "--recipe", "ngram-only", "--profile", "smoke", "--data", data, "--steps", "2",
             "--no-progress", "--out", run, "--ngram", "slots=8"]) == 0
assert main(["eval", "--run", run]) == 0
study = sorted(m for m in sys.modules if m.startswith("frontier.study"))
assert study == [], study
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]


def test_eval_errors_give_the_fix_in_flags(smoke_data, tmp_path, capsys):
    """eval's refusals speak the command line's words: a committed record without its checkpoint names
    `frontier retrain`; a run without an EMA or n-gram tables names the flag to drop."""
    import shutil

    from frontier.recipes import resolve
    from frontier.train.trainer import train

    train(resolve("baseline", "smoke"), smoke_data, tmp_path / "b", "cpu", seed=0, steps=2, progress=False)
    code, out, err = main_cli(capsys, "eval", "--run", str(tmp_path / "b"), "--weights", "ema", "--device", "cpu")
    assert_one_line_error(code, err, "has no EMA", "pass --weights live, or drop --weights")
    code, out, err = main_cli(capsys, "eval", "--run", str(tmp_path / "b"), "--adaptive", "--device", "cpu")
    assert_one_line_error(code, err, "no n-gram tables", "drop --adaptive")
    (tmp_path / "record").mkdir()
    shutil.copy(tmp_path / "b" / "result.json", tmp_path / "record" / "result.json")  # as committed: no checkpoint
    code, out, err = main_cli(capsys, "eval", "--run", str(tmp_path / "record"), "--device", "cpu")
    assert_one_line_error(code, err, "checkpoints are not committed", f"frontier retrain {tmp_path / 'record'} --out")
