"""The record card (`frontier.study.card`) and the validation split's own uncertainty (`frontier.study.bootstrap`)."""

import pytest

from frontier.config import EMAConfig
from frontier.errors import UserError
from frontier.recipes import resolve
from test_cli import assert_one_line_error, main_cli
from frontier.study.bootstrap import bootstrap_bpb, paired_bootstrap_bpb, per_document

# ----------------------------------------------------------------------------- bootstrap over documents


def test_identical_documents_leave_no_uncertainty():
    same = {"bits": [123.25] * 19, "bytes": [100] * 19}
    b = bootstrap_bpb(same, n=500, seed=1)
    assert b["low"] == b["high"] == b["bpb"] == 1.2325  # every draw the same: no width at all
    assert b["mean"] == pytest.approx(1.2325, rel=1e-15)
    assert b["documents"] == 19 and b["resamples"] == 500


def test_each_draw_is_bits_summed_over_bytes_summed_of_whole_documents():
    """Two documents, bpb 1 (10 bits / 10 bytes) and 3 (60 / 20): a draw is both of one (1 or 3, a quarter of the
    draws each) or one of each (70 / 30). Drawing bits and bytes apart, or averaging the documents' ratios, would
    give other values."""
    b = bootstrap_bpb({"bits": [10.0, 60.0], "bytes": [10, 20]}, n=20_000, seed=0, level=0.9)
    assert (b["low"], b["high"]) == (1.0, 3.0)
    assert b["bpb"] == 70 / 30
    assert abs(b["mean"] - (0.25 * 1 + 0.25 * 3 + 0.5 * 70 / 30)) < 0.02


def test_a_run_paired_with_itself_differs_by_exactly_zero():
    run = {"val_by_document": {"bits": [812.5, 90.0, 4410.25, 17.0], "bytes": [500, 61, 2400, 9]}}
    d = paired_bootstrap_bpb(run, run, n=1000, seed=3)
    assert d["difference"] == d["mean"] == d["low"] == d["high"] == 0.0


def test_pairing_cancels_what_both_runs_share():
    """b scores 0.1 bit per byte worse on every document: every joint draw differs by 0.1, however hard its
    documents (unpaired draws would spread with the documents' difficulty)."""
    nbytes = [500, 61, 2400, 9, 700]
    a = {"bits": [812.5, 90.0, 4410.25, 17.0, 300.0], "bytes": nbytes}
    b = {"bits": [x + 0.1 * n for x, n in zip(a["bits"], nbytes)], "bytes": nbytes}
    d = paired_bootstrap_bpb(a, b, n=2000, seed=0)
    assert d["difference"] == pytest.approx(-0.1, abs=1e-12)
    assert d["low"] == pytest.approx(-0.1, abs=1e-12) and d["high"] == pytest.approx(-0.1, abs=1e-12)
    alone = bootstrap_bpb(a, n=2000, seed=0)
    assert alone["high"] - alone["low"] > 0.1  # the documents' own spread, which pairing removed


def test_runs_scored_on_other_documents_do_not_pair():
    a = {"bits": [1.0, 2.0], "bytes": [10, 20]}
    with pytest.raises(UserError, match="same documents"):
        paired_bootstrap_bpb(a, {"bits": [1.0, 2.0, 3.0], "bytes": [10, 20, 30]})


def test_a_record_without_per_document_scores_is_one_clear_error():
    old = {"val_bpb": 1.7, "val_bytes": 67266, "run_dir": "runs/cpu/ngram-sized/s0"}
    with pytest.raises(UserError) as e:
        bootstrap_bpb(old)
    assert "runs/cpu/ngram-sized/s0" in str(e.value) and "val_by_document" in str(e.value)
    assert "\n" not in str(e.value)
    with pytest.raises(UserError):
        per_document({"val_by_document": {"bits": [1.0], "bytes": [1, 2]}})


# ----------------------------------------------------------------------------- the record card


def _record(cfg, seed=0, max_steps=None, folder=None):
    """The fields of a run record the reproducing command is derived from; `folder` None: the profile's corpus as
    the profile prepares it (in another machine's cache)."""
    from frontier.data.dataset import embedded_folder_name
    from frontier.profiles import get_profile

    p = get_profile(cfg.profile)
    default = embedded_folder_name(cfg.model.vocab_size, corpus_name=p.corpus, max_bytes=p.corpus_bytes,
                                   python="3.11.7")
    folder = folder or f"/elsewhere/.cache/frontier/data/{default}"
    return {"recipe": cfg.recipe, "label": cfg.recipe, "profile": cfg.profile, "config": cfg.to_dict(),
            "config_hash": cfg.digest(), "seed": seed, "max_steps": max_steps, "device": {"kind": "cpu"},
            "hardware": {"python": "3.11.7"}, "data": {"folder": folder, "manifest_hash": "0"}, "world_size": 1,
            "strict": False}


def _config_of_command(argv, vocab_size):
    """What `frontier train` itself resolves from a command line: the CLI's own parser and config."""
    from frontier.cli import build_parser
    from frontier.flags import train_config

    assert argv[:2] == ["frontier", "train"]
    a = build_parser().parse_args(argv[1:])
    return a, train_config(a, vocab_size, a.kernels)


CHANGED = [
    # (recipe, profile, resolve's changes, steps): flags for n-gram, optimiser and EMA settings, steps, a budget
    ("ngram-only", "smoke", dict(ngram={"slots": 8, "smoothing": "absolute", "mix_lr": 0.05}), 7),
    ("ema", "cpu", dict(budget_s=90.0, optim={"matrix_lr": 0.03, "muon_momentum_warmup_frac": 0.5},
                        ema=EMAConfig(0.25, 0.1, 2, 0.5)), None),
    ("ngram-tuned", "cpu", dict(clock="wall", kernels="interpreter"), None),
]


@pytest.mark.parametrize("recipe,profile,changes,steps", CHANGED)
def test_the_reproducing_command_parses_and_resolves_to_the_recorded_config(recipe, profile, changes, steps):
    from frontier.study.card import reproduce

    cfg = resolve(recipe, profile, **changes)
    rec = _record(cfg, seed=4, max_steps=steps)
    r = reproduce(rec)
    assert r.exact, r.differs
    a, again = _config_of_command(r.argv, cfg.model.vocab_size)
    assert again.to_dict() == cfg.to_dict() and again.digest() == rec["config_hash"]
    assert (a.seed, a.steps, a.device, a.data) == (4, steps, "cpu", None)


def test_data_other_than_the_profiles_own_is_passed_with_data():
    from frontier.study.card import reproduce

    r = reproduce(_record(resolve("baseline", "smoke"), folder="/data/mine"))
    assert _config_of_command(r.argv, 512)[0].data == "/data/mine"


def test_a_config_no_flag_reaches_is_named_not_hidden():
    """A size of a sweep's own (resolve(..., sizes=)) has no `frontier train` flag: the card says so."""
    from frontier.study.card import record_card, reproduce

    rec = _record(resolve("ngram-sized", "cpu", sizes={"n_layer": 4}))
    r = reproduce(rec)
    assert not r.exact and any(d.startswith("model.n_layer: record 4") for d in r.differs)
    rec.update(steps=10, val_bpb=2.5, bpb_convention="nanochat", params=None)
    assert "**Not exact**" in record_card(rec)


def test_an_older_record_is_exact_only_where_its_missing_fields_are_later_defaults():
    """A field added after a record was written (`LATER_FIELDS`), at the default older code ran with, is no
    difference; any other field the record lacks is, because this code's default may not be what that code did."""
    from frontier.study.card import reproduce

    rec = _record(resolve("ngram-only", "smoke"))
    del rec["config"]["model"]["ngram"]["check_bits"], rec["config"]["train"]["clock"]
    rec["config"]["train"].update(clock="steps")  # the smoke profile's clock is not a later field's default
    assert reproduce(rec).exact
    del rec["config"]["model"]["ngram"]["folds"]
    r = reproduce(rec)
    assert r.differs == ["model.ngram.folds: not in the record, flags 2"]


@pytest.fixture(scope="module")
def smoke_run(smoke_data, tmp_path_factory):
    """A finished smoke run of the n-gram model alone (no network to compile), with an n-gram setting changed."""
    from frontier.devices import select_device
    from frontier.train.trainer import train

    cfg = resolve("ngram-only", "smoke", ngram={"slots": 8})
    run_dir = tmp_path_factory.mktemp("card") / "run"
    train(cfg, smoke_data, run_dir, select_device("cpu"), seed=2, steps=3, progress=False)
    return run_dir


def test_a_runs_per_document_bits_sum_to_its_total(smoke_run, smoke_data):
    from frontier.records import load_record

    rec = load_record(smoke_run)
    per_doc = rec["val_by_document"]
    assert len(per_doc["bits"]) == int((smoke_data.val_tokens() == smoke_data.tokenizer.bos_id).sum())
    assert sum(per_doc["bytes"]) == rec["val_bytes"]
    assert sum(per_doc["bits"]) == pytest.approx(rec["val_bpb"] * rec["val_bytes"], rel=1e-12)
    assert rec["data"]["train_tokens"] == sum(len(t) for t in smoke_data.train_tokens())


def test_the_card_shows_the_score_with_its_steps_and_a_command_that_reproduces_it(smoke_run, capsys):
    from frontier.records import load_record
    from frontier.study.card import reproduce

    rec = load_record(smoke_run)
    code, card, err = main_cli(capsys, "card", str(smoke_run))
    assert code == 0, err
    assert f"**val_bpb {rec['val_bpb']:.4f} ({rec['steps']:,} steps)**" in card
    assert "score in [" in card  # the interval over the validation documents
    assert "n-gram tables:" in card and f"{rec['ngram']['table_mib']:.1f} MiB" in card
    epochs = rec["tokens"] / rec["data"]["train_tokens"]
    assert f"{epochs:.2f} epochs of {rec['data']['train_tokens']:,} training tokens (recorded)" in card
    command = reproduce(rec)
    assert command.exact and f"```\n{command.command()}\n```" in card
    a, again = _config_of_command(command.argv, rec["config"]["model"]["vocab_size"])
    assert again.digest() == rec["config_hash"] and a.steps == 3 and a.ngram == ["slots=8"]


def test_the_card_of_an_excluded_run_says_so_and_why(tmp_path):
    from frontier.study.bench_records import exclude
    from frontier.study.card import score_section

    rec = {"recipe": "baseline", "steps": 10, "val_bpb": 2.5, "bpb_convention": "nanochat", "status": "finished",
           "run_dir": str(tmp_path)}
    assert not any("Excluded" in line for line in score_section(rec))
    exclude(tmp_path, "trained under changing load")
    assert any("Excluded" in line and "trained under changing load" in line for line in score_section(rec))


def test_the_card_is_written_to_out(smoke_run, tmp_path, capsys):
    code, card, err = main_cli(capsys, "card", str(smoke_run), "--out", str(tmp_path / "card.md"))
    assert code == 0, err
    assert (tmp_path / "card.md").read_text() == card


def test_a_folder_without_a_record_is_one_clear_error(tmp_path, capsys):
    code, out, err = main_cli(capsys, "card", str(tmp_path))
    assert_one_line_error(code, err, "holds no run record", "frontier train")



def test_the_artifact_is_the_saved_state_counted_by_part():
    from frontier.study.card import artifact_bytes, parameters_section
    from frontier.train.step import build_model

    for recipe in ("baseline", "ema"):
        cfg = resolve(recipe, "smoke")
        model = build_model(cfg)
        rec = _record(cfg)
        art = artifact_bytes(rec)
        weights = sum(p.numel() * p.element_size() for n, p in model.named_parameters() if not n.endswith(".sink"))
        assert art["weights"] == weights > 0
        params = dict(model.named_parameters())
        tables = sum(t.numel() * t.element_size() for n, t in model.state_dict().items()
                     if n.startswith("ngram.") and n not in params)  # the mixture's weights are weights
        assert art["n-gram tables"] == tables and (tables > 0) == (recipe == "ema")
        rec["params"] = model.num_params()
        line = next(x for x in parameters_section(rec) if x.startswith("artifact"))
        assert f"{sum(art.values()):,} bytes" in line


def test_a_superseded_run_says_so_at_the_top_of_its_card():
    from frontier.study.card import record_card

    cfg = resolve("baseline", "cpu")
    rec = {**_record(cfg, folder="/x/embedded-py3.11.7-v1024"), "params": 1}
    assert "**Superseded**: made on the embedded corpus" in record_card(rec).split("###")[0]
    assert "Superseded" not in record_card({**_record(cfg), "params": 1})
