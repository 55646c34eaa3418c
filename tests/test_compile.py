"""torch.compile: counters, recompile detection, and that compiling does not change what is learned."""

import dataclasses
import warnings

import pytest
import torch

from frontier.devices import select_device
from frontier.recipes import resolve
from frontier.train.compile import CompileWatch, RecompileError
from frontier.train.trainer import train

CPU = select_device("cpu")


def _fn(x):
    return (x.sin() * 2).cos().sum()


def test_recompile_after_warmup_warns_and_strict_raises():
    torch._dynamo.reset()
    f = torch.compile(_fn, backend="eager", dynamic=False)
    watch = CompileWatch(True, strict=False, log=lambda m: None)
    f(torch.randn(4))
    watch.warmup_done()
    f(torch.randn(4))
    watch.after_step(2)
    assert watch.summary()["recompiles_after_warmup"] == 0
    f(torch.randn(7))  # a new shape: a recompilation
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        watch.after_step(3)
    assert any("recompiled" in str(x.message) for x in w)
    assert watch.summary()["recompiles_after_warmup"] == 1 and watch.summary()["frames_compiled_in_warmup"] == 1
    strict = CompileWatch(True, strict=True, log=lambda m: None)
    strict.warmup_done()
    f(torch.randn(9))
    with pytest.raises(RecompileError, match="--strict"):
        strict.after_step(4)


def test_a_cold_bench_compiles_again_what_this_process_compiled_before():
    """`cold_compile_caches` (the bench's `cold=True`) times a compile from scratch: a graph this process compiled
    earlier (a replayed run, an earlier bench) is compiled again, not reused from memory."""
    from frontier.study.bench import cold_compile_caches

    compiled = []

    def backend(gm, example_inputs):  # counts the graphs handed to it: a compile, not a reuse
        compiled.append(gm)
        return gm.forward

    torch._dynamo.reset()
    torch.compile(_fn, backend=backend, dynamic=False)(torch.randn(4))
    torch.compile(_fn, backend=backend, dynamic=False)(torch.randn(4))
    assert len(compiled) == 1  # warm: the same code object's graph is reused from memory
    with cold_compile_caches():
        torch.compile(_fn, backend=backend, dynamic=False)(torch.randn(4))
    assert len(compiled) == 2  # compiled again


STEPS = 15


@pytest.fixture(scope="module")
def compiled_run(smoke_data, tmp_path_factory):
    """`compile` at smoke, seed 0, STEPS steps: what eager and the compiled optimiser step are compared with (trained
    once for both tests)."""
    return train(resolve("compile", "smoke"), smoke_data, tmp_path_factory.mktemp("compiled") / "c", CPU, seed=0,
                 steps=STEPS, progress=False)


def test_compile_trains_to_the_same_loss_as_eager(smoke_data, tmp_path, compiled_run):
    """Tolerance: per-step training losses within 0.02 nats, val_bpb within 0.01 (float reassociation only)."""
    eager = train(resolve("baseline", "smoke"), smoke_data, tmp_path / "e", CPU, seed=0, steps=STEPS, progress=False)
    comp = compiled_run
    diffs = [abs(a - b) for a, b in zip(eager["curve"]["train_loss"], comp["curve"]["train_loss"])]
    assert len(diffs) == 15 and max(diffs) < 0.02, max(diffs)
    assert abs(eager["val_bpb"] - comp["val_bpb"]) < 0.01
    c = comp["compile"]
    assert c["frames_compiled_in_warmup"] >= 1 and c["recompiles_after_warmup"] == 0
    assert comp["first_step_s"] > eager["first_step_s"]  # the compile, in the first step's wall seconds
    # the steps rule charges every step the table's cost: the compile is charged nothing beyond it
    assert comp["budget"]["source"] == "table" and comp["uncharged_s"] == 0
    assert comp["charged_s"] == pytest.approx(comp["budget"]["cost"]["fixed_s"] + STEPS * comp["budget"]["cost"]["step_s"])
    assert comp["compile_s"] > 0 and eager["compile_s"] is None and comp["step_s_median"] > 0
    assert comp["device"]["compile_backend"] == "inductor" and eager["compile"] is None


def test_each_compiled_run_counts_its_own_compile(smoke_data, tmp_path):
    """A second compiled run in one process (a second seed, a notebook that benched first) compiles for itself and
    records its own counts, not 0 frames and 0 graphs off the first run's in-memory compile."""
    cfg = resolve("compile", "smoke")
    runs = [train(cfg, smoke_data, tmp_path / f"s{seed}", CPU, seed=seed, steps=4, progress=False) for seed in (0, 1)]
    first, second = (r["compile"] for r in runs)
    for c in (first, second):
        assert c["frames_compiled_in_warmup"] >= 1 and c["unique_graphs"] >= 1, c
        assert c["recompiles_after_warmup"] == 0
    assert second["frames_compiled_in_warmup"] == first["frames_compiled_in_warmup"]
    assert second["unique_graphs"] == first["unique_graphs"]
    disk = ["fxgraph_cache_hits", "fxgraph_cache_misses", "fxgraph_cache_bypasses", "autograd_cache_hits",
            "autograd_cache_misses"]
    for c in (first, second):  # Inductor's on-disk cache survives: a hit tells a warm-cache compile from a cold one
        assert all(c[k] >= 0 for k in disk), c
        if torch._inductor.config.fx_graph_cache:  # each graph Inductor compiled looked the cache up
            assert c["fxgraph_cache_hits"] + c["fxgraph_cache_misses"] >= 1, c


def test_compiled_optimizer_step_trains_like_the_compiled_model_alone(smoke_data, tmp_path, compiled_run):
    """Same tolerance as above: compiling Muon's Newton-Schulz step only reassociates floats."""
    comp = compiled_run
    opt = train(resolve("compile-opt", "smoke"), smoke_data, tmp_path / "o", CPU, seed=0, steps=STEPS, progress=False)
    diffs = [abs(a - b) for a, b in zip(comp["curve"]["train_loss"], opt["curve"]["train_loss"])]
    assert len(diffs) == STEPS and max(diffs) < 0.02, max(diffs)
    assert opt["implementations"]["newton_schulz"] == "reference (inlined into the compiled graph)"  # CPU: traced in
    assert opt["compile"]["recompiles_after_warmup"] == 0
    assert opt["compile"]["frames_compiled_in_warmup"] > comp["compile"]["frames_compiled_in_warmup"]


def test_compiled_ngram_bias_hashes_like_eager():
    from frontier.train.trainer import build_model

    cfg = resolve("ngram", "smoke")
    model = build_model(cfg)
    x = torch.randint(0, cfg.model.vocab_size, (2, 64))
    model.ngram.observe(x[:, :-1], x[:, 1:])
    compiled = torch.compile(model.ngram.bias, backend="inductor", dynamic=False)
    with torch.no_grad():
        assert torch.allclose(compiled(x), model.ngram.bias(x), atol=1e-5)
