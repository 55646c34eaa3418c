"""The book's trn2 dry run: every chapter executed by papermill (the book runner) at the `trn2-dry` profile (trn2's
setting at tiny shapes: its fixed vocabulary of 8,192, its wall clock) on a stand-in Neuron host
(tests/neuron_standin.py: a native-Neuron device whose tensors live on this CPU, a "neuron" compile backend, the nki
kernels in the interpreter), on a small data folder prepared at 8,192. A chapter that stops on a Neuron host for a
reason no hardware is needed to find (a bench of what such a host cannot run, a shape a profile's name chose) stops
here. What only a Trn2 shows is in docs/trainium.md."""

import json
import os
from pathlib import Path

import nbformat
import pytest

from frontier.study.book import NOTEBOOKS, run_book

CHAPTERS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
TESTS = Path(__file__).parent
STARTUP = f"""import sys
sys.path.insert(0, {str(TESTS)!r})
import neuron_standin
neuron_standin.install()
"""


@pytest.fixture(scope="module")
def trn2_data(tmp_path_factory, corpus_dir, val_dir):
    """The pydoc topics prepared at the competition's vocabulary (8,192 pieces; the trn2 profiles refuse another),
    validated on the suite's small multilingual folder (a few hundred tokens: every run scores it, in bf16 on a CPU)."""
    from frontier.data.dataset import prepare

    out = tmp_path_factory.mktemp("data") / "v8192"
    return prepare(out, text=[str(corpus_dir)], val_text=[str(val_dir)], vocab_size=8192, log=lambda m: None)


@pytest.fixture(scope="module")
def neuron_host(tmp_path_factory):
    """The papermill kernels start as stand-in Neuron hosts: an IPython start-up file installs the stand-in; the
    kernel imports this checkout's `frontier`. One run root for every chapter (runs are shared as on disk)."""
    ipython = tmp_path_factory.mktemp("ipython")
    startup = ipython / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-neuron-standin.py").write_text(STARTUP)
    repo = str(NOTEBOOKS.parent)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("IPYTHONDIR", str(ipython))
        mp.setenv("PYTHONPATH", os.pathsep.join([repo, *filter(None, [os.environ.get("PYTHONPATH")])]))
        yield tmp_path_factory.mktemp("book-trn2")


@pytest.mark.parametrize("ipynb", CHAPTERS, ids=lambda p: p.stem)
def test_the_chapter_runs_at_trn2_on_a_stand_in_neuron_host(ipynb, neuron_host, trn2_data):
    lines = []
    ok = run_book(profile="trn2-dry", chapters=ipynb.name[:2], out=str(neuron_host), data=str(trn2_data.folder),
                  log=lines.append)
    assert ok == 0, "\n".join(lines)
    out = nbformat.read(neuron_host / ipynb.name, as_version=4)
    assert out.metadata["papermill"]["parameters"]["profile"] == "trn2-dry"
    # what the chapter trained ran on the (stand-in) Neuron device, on the data folder at 8,192
    for path in (neuron_host / "runs").rglob("result.json"):
        rec = json.loads(path.read_text())
        assert rec["device"]["backend"] == "neuron-native", path
        assert rec["data"]["manifest_hash"] == trn2_data.manifest_hash, path
    if ipynb.name.startswith("03"):  # the interpreter bench, which a Neuron device refuses, ran on the CPU device
        folder = neuron_host / "runs" / "trn2-dry" / "bench"
        bench = sorted(folder.glob("bench-baseline+baseline@interpreter-*.json"))
        assert bench and json.loads(bench[-1].read_text())["arguments"]["device"] == "cpu"
