"""frontier: a language model trained from scratch under a fixed budget, as a package and a book.

The rooms, each a subpackage with its own docstring:

    frontier/   cli flags config profiles recipes records devices figures errors   the run's vocabulary, the wiring
      data/     corpus audit tokenizer shards dataset loader                 documents in, batches out
      model/    gpt bigram ngram/                                            what is trained
      optim/    adamw muon bigram_update optimizers                          how it is updated
      train/    trainer run step checkpoint evaluate cost clock probes       a run under a budget, and its score
                compile distributed ema bpb
      kernels/  ops reference interpreted neuron toolchain nki/ interpreter/ the fused ops and their implementations
      study/    cli bench* bench_records costs corpus_candidates workers ngram_orders roofline census
                compressors compare replay experiments ladder book report   the studies, and the book's machinery

One rule makes it a design: nothing in data, model, optim, train or kernels imports study, and kernels imports
nothing but config, devices and errors (tests/test_layout.py checks every import).

The names a notebook or an experiment needs are importable from here (loaded on first use, so `import frontier`
stays cheap and importing a core module never pulls in the study tools):

    from frontier import resolve, prepare, profile_dataset, build_model, Optimizers, TrainLoader, train, resume, evaluate

`docs/reference.md` ("The Python API") shows them at work; the suite runs that example.
"""

from importlib import import_module

__version__ = "0.1.0"

# name -> "module:attribute" (a name the module defines), or "module" (the module itself)
PUBLIC = {
    "get_profile": "frontier.profiles:get_profile",
    "get_recipe": "frontier.recipes:get_recipe",
    "resolve": "frontier.recipes:resolve",
    "Dataset": "frontier.data.dataset:Dataset",
    "prepare": "frontier.data.dataset:prepare",
    "profile_dataset": "frontier.data.dataset:profile_dataset",
    "select_device": "frontier.devices:select_device",
    "GPT": "frontier.model.gpt:GPT",
    "build_model": "frontier.train.step:build_model",
    "Optimizers": "frontier.optim.optimizers:Optimizers",
    "TrainLoader": "frontier.data.loader:TrainLoader",
    "train": "frontier.train.trainer:train",
    "resume": "frontier.train.trainer:resume",
    "evaluate": "frontier.train.evaluate:evaluate_run",
    "evaluate_run": "frontier.train.evaluate:evaluate_run",
    "load_run_model": "frontier.train.checkpoint:load_run_model",
    "load_record": "frontier.records:load_record",
    "compare": "frontier.study.compare:compare",
    "format_comparison": "frontier.study.compare:format_comparison",
    "experiments": "frontier.study.experiments",
}
__all__ = sorted(PUBLIC)


def __getattr__(name: str):
    if name not in PUBLIC:
        raise AttributeError(f"module 'frontier' has no attribute {name!r}")
    module, _, attr = PUBLIC[name].partition(":")
    value = import_module(module)
    value = getattr(value, attr) if attr else value
    globals()[name] = value  # the next lookup finds it directly
    return value


def __dir__():
    return sorted(set(globals()) | set(PUBLIC))
