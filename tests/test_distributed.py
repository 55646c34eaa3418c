"""Data parallelism (`frontier.train.distributed`) on the CPU: gloo, 2 processes, smoke profile, a few steps.

One torchrun job (this file run as a script: `worker`) trains every recipe on 2 ranks; the tests compare each with
the same recipe trained by one process on the whole batch. The batch is the profile's (8 rows: 4 per rank), the
seed and the steps the same, so only the order of the sums differs (the gradient all-reduce, the loss average,
Muon's batches of matrices split over the ranks): the losses must agree within `REL_TOL`.

Every recipe of `frontier recipes` is checked, `ngram-only` included (it trains the mixture weights of its
n-gram model). To fit the file in about a minute and a half on 2 cores: a small dataset (a quarter of the test
corpus: counting the n-gram shards takes a second), one thread per process (the ranks' own setting: 2 cores, 2
ranks), the compiled recipes compiled with the `aot_eager` backend (TorchDynamo, DDP's graph splitting and
AOTAutograd as on any device, without Inductor's code generation, which data parallelism does not touch), and the
recipes in `EAGER` run eagerly: what they add to their parent (the dense table update, streamed counting, one fold,
the EMA) lies outside the compiled graph, whose interplay with DDP their parents already check.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from frontier.devices import select_device
from frontier.recipes import RECIPES, resolve
from frontier.train import distributed

# Every recipe but the three whose code paths the others already cover under two ranks (the better n-gram tables
# and the per-context mixing run in ngram-ctx; the n-gram model alone in ngram-only): the suite's time is finite.
DP_RECIPES = [r for r in RECIPES if r not in ("ngram-tables", "ngram-only-tables", "ngram-only-ctx", "gate",
                                                 "ngram-sized")]

# float32 sums in another order differ by a few units in the last place (about 1e-7 relative) at each step;
# over STEPS steps of training that stays near 1e-7 here (measured: at most 1.6e-7). A real difference in what
# is trained (a rank missing the other's rows, a wrong learning rate, counts of half the batch) moves the losses
# by 1e-3 or more from the second step on.
REL_TOL = 1e-5
STEPS = 4
SEED = 1
RESUME_STEPS = 60  # the interrupted run: long enough to be stopped part way
CPU = select_device("cpu")
DEVICE = dataclasses.replace(CPU, compile_backend="aot_eager")  # see the module's docstring
EAGER = {"bigram-dense", "ngram-stream", "ngram-insample", "ema"}


def _cfg(recipe: str, vocab_size: int):
    cfg = resolve(recipe, "smoke", vocab_size=vocab_size)
    if recipe in EAGER:
        cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, compile=False))
    return cfg


def worker(data: str, out: str) -> None:
    """Run on each rank by torchrun: every recipe for STEPS steps, the resume reference, and a check that
    `map_shards` gives each rank its share."""
    from frontier.data.dataset import Dataset
    from frontier.train import trainer
    from frontier.train.trainer import train

    dist, _ = distributed.init(CPU)
    assert dist.world_size == 2 and torch.get_num_threads() == max(1, distributed.usable_cores() // 2)
    out = Path(out)
    marked = dist.map_shards(lambda part: part + 1000 * dist.rank, torch.zeros(5, 2))  # 3 rows each, 1 padded
    if dist.is_main:
        (out / "shards.json").write_text(json.dumps(marked[:, 0].tolist()))
    dataset = Dataset(data)
    for recipe in DP_RECIPES:
        train(_cfg(recipe, dataset.vocab_size), dataset, out / recipe, DEVICE, seed=SEED, steps=STEPS,
              progress=False, dist=dist)
    train(_cfg("baseline", dataset.vocab_size), dataset, out / "resume-reference", DEVICE, seed=SEED,
          steps=RESUME_STEPS, progress=False, dist=dist)
    # A run that rank 0's SIGINT stops early (the first progress update raises it, after step 1), for a resume
    # by one process: the sparse table's gradient sink is a rank's batch wide in its checkpoint.
    trainer.Progress.update = lambda self, *a, **k: signal.raise_signal(signal.SIGINT)
    try:
        train(_cfg("bigram", dataset.vocab_size), dataset, out / "interrupted-bigram", DEVICE, seed=SEED,
              steps=STEPS, dist=dist)
    except trainer.RunStopped:
        pass
    distributed.close()


def _torchrun(*args, **kw):
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                           *args], capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def small_data(tmp_path_factory, corpus_dir, val_dir):
    """A quarter of the test corpus (about 60,000 training tokens) at the smoke profile's vocabulary."""
    from frontier.data.dataset import prepare

    out = tmp_path_factory.mktemp("data") / "small"
    return prepare(out, text=[str(p) for p in sorted(corpus_dir.glob("*.txt"))[::4]], val_text=[str(val_dir)],
                   vocab_size=512, log=lambda m: None)


@pytest.fixture
def one_thread():
    """One process on one thread, as each of the 2 ranks runs on 2 cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def two_ranks(small_data, tmp_path_factory):
    """The 2-process job's output folder: a run folder per recipe (written by rank 0)."""
    out = tmp_path_factory.mktemp("two-ranks")
    proc = _torchrun(__file__, str(small_data.folder), str(out), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def _records(path: Path) -> dict:
    return json.loads((path / "result.json").read_text())


def test_each_rank_orthogonalises_its_share(two_ranks):
    # 5 matrices over 2 ranks: rank 0 maps the first 3, rank 1 the other 2 (and one zero row of padding)
    assert json.loads((two_ranks / "shards.json").read_text()) == [0, 0, 0, 1000, 1000]


@pytest.mark.parametrize("recipe", DP_RECIPES)
def test_two_ranks_train_what_one_process_trains(recipe, two_ranks, small_data, tmp_path, one_thread):
    from frontier.train.trainer import train

    two = _records(two_ranks / recipe)
    one = train(_cfg(recipe, small_data.vocab_size), small_data, tmp_path / recipe, DEVICE, seed=SEED, steps=STEPS,
                progress=False)
    assert two["status"] == one["status"] == "finished" and two["steps"] == one["steps"] == STEPS
    assert two["config_hash"] == one["config_hash"]  # the world size is not part of what is trained
    assert (two["world_size"], one["world_size"], one["distributed"]) == (2, 1, None)
    d = two["distributed"]
    assert d["backend"] == "gloo" and d["rank_batch_size"] == one["config"]["train"]["batch_size"] // 2
    assert d["threads_per_rank"] == max(1, distributed.usable_cores() // 2) == two["hardware"]["torch_threads"]
    assert two["tokens"] == one["tokens"]  # the global batch: the same tokens per step
    for a, b in zip(two["curve"]["train_loss"], one["curve"]["train_loss"]):
        assert math.isclose(a, b, rel_tol=REL_TOL), (two["curve"]["train_loss"], one["curve"]["train_loss"])
    for key in ("val_bpb", "val_bpb_live", "val_bpb_ema"):
        if key in one:
            assert math.isclose(two[key], one[key], rel_tol=REL_TOL), key
    if one["ngram"] is not None:  # every rank counted the whole batch (or all the shards): the same tables
        assert two["ngram"]["counted_tokens"] == one["ngram"]["counted_tokens"] > 0
        assert two["ngram"]["contexts_in_use"] == one["ngram"]["contexts_in_use"]
        a = torch.load(two_ranks / recipe / "checkpoint.pt", weights_only=False)["model"]
        b = torch.load(tmp_path / recipe / "checkpoint.pt", weights_only=False)["model"]
        tables = [k for k in b if k.startswith("ngram.") and b[k].dtype in (torch.int64, torch.bool)]
        assert tables and all(torch.equal(a[k], b[k]) for k in tables)


def test_a_two_rank_run_resumes_and_evaluates_on_one_process(two_ranks, small_data, tmp_path, one_thread):
    from frontier.train.trainer import evaluate_run, resume, train

    run = two_ranks / "interrupted-bigram"
    rec = _records(run)
    # raised after step 1's all-reduce, the signal reaches every rank with step 2's: both stop after step 2
    assert (rec["status"], rec["signal"], rec["steps"], rec["world_size"]) == ("interrupted", "SIGINT", 2, 2)
    cfg = _cfg("bigram", small_data.vocab_size)
    resumed = resume(run, small_data, DEVICE, progress=False)  # one process now
    full = train(cfg, small_data, tmp_path / "full", DEVICE, seed=SEED, steps=STEPS, progress=False)
    assert resumed["status"] == "finished" and resumed["steps"] == STEPS and resumed["world_size"] == 1
    assert resumed["world_size_by_session"] == [2, 1] and "world_size_by_session" not in full
    for a, b in zip(resumed["curve"]["train_loss"], full["curve"]["train_loss"]):
        assert math.isclose(a, b, rel_tol=REL_TOL)
    two = _records(two_ranks / "bigram")  # a 2-rank checkpoint, evaluated by one process
    assert evaluate_run(two_ranks / "bigram", small_data, CPU)["val_bpb"] == pytest.approx(two["val_bpb"], rel=1e-9)


def test_a_batch_the_ranks_cannot_share_is_refused(small_data):
    proc = subprocess.run([sys.executable, "-m", "frontier", "train", "--recipe", "baseline", "--profile", "smoke",
                           "--data", str(small_data.folder), "--nproc", "3", "--steps", "2"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: the batch of 8 rows cannot be split over 3 processes; use a process count that divides it "
        "(1, 2, 4, 8)"]


def _launch(*args):
    return subprocess.Popen([sys.executable, "-m", "frontier", "train", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_interrupt_and_resume_two_ranks_continues_exactly(two_ranks, small_data, tmp_path):
    run = tmp_path / "interrupted"
    proc = _launch("--recipe", "baseline", "--profile", "smoke", "--data", str(small_data.folder), "--device", "cpu",
                   "--seed", str(SEED), "--steps", str(RESUME_STEPS), "--nproc", "2", "--out", str(run))
    for line in proc.stderr:  # rank 0's progress, a line every tenth of the run: stop it after the first
        if f"/{RESUME_STEPS} " in line:
            proc.send_signal(signal.SIGINT)  # what Ctrl-C sends the launcher; torchrun passes it to every rank
            break
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    rec = _records(run)
    assert rec["status"] == "interrupted" and 0 < rec["steps"] < RESUME_STEPS and rec["world_size"] == 2
    assert "--resume" in err and "Traceback" not in err
    proc = _launch("--resume", str(run), "--device", "cpu", "--no-progress")  # 2 processes again: the run's count
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.strip().splitlines()[-1].startswith("val_bpb=")
    resumed, full = _records(run), _records(two_ranks / "resume-reference")
    assert resumed["status"] == "finished" and resumed["steps"] == RESUME_STEPS and resumed["world_size"] == 2
    assert resumed["curve"]["train_loss"] == full["curve"]["train_loss"]  # bit for bit
    assert resumed["val_bpb"] == full["val_bpb"]


def _rank_pid(launcher: int, rank: int) -> int | None:
    """The pid of the worker with RANK=`rank` among the children of `launcher`."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == launcher and f"RANK={rank}".encode() in env:
            return int(pid)
    return None


def test_a_killed_rank_ends_the_job_with_an_error_line(small_data, tmp_path):
    run = tmp_path / "killed"
    proc = _launch("--recipe", "baseline", "--profile", "smoke", "--data", str(small_data.folder), "--device", "cpu",
                   "--steps", "100000", "--nproc", "2", "--out", str(run))
    deadline = time.time() + 60
    while not (run / "result.json").exists() and time.time() < deadline:  # rank 0 writes it as training starts
        time.sleep(0.05)
    time.sleep(1.0)
    pid = _rank_pid(proc.pid, 1)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    t0 = time.time()
    out, err = proc.communicate(timeout=120)
    assert time.time() - t0 < 60  # torchrun stops the other rank: no hang
    assert proc.returncode == 1
    assert "error: rank 1 of 2 was killed by SIGKILL" in err, err[-3000:]
    assert "Traceback" not in err  # the surviving rank says in one line that its collective failed
    assert _records(run)["status"] in ("running", "failed")


if __name__ == "__main__":  # torchrun runs this file on each rank: see `worker`
    worker(*sys.argv[1:])
