"""The record card (`frontier.study.card`) and the validation split's own uncertainty (`frontier.study.bootstrap`)."""

import pytest

from frontier.errors import UserError
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
