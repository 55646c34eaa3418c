"""Every kernel verified on a trained checkpoint's activations (frontier.study.census.verify_trained).

Checking the head kernel at initialisation proves little: the head's weights start tiny, the logits are about 0, so
the online log-sum-exp's running max barely moves between vocabulary chunks and tanh(l / cap) stays near its linear
part. Here the smoke model is trained 150 steps (reference kernels), its checkpoint loaded, and one training step's
fused-op calls (forward, backward, Muon's Newton-Schulz, AdamW) are captured and each kernel run on them in the
interpreter against float64, with fp32 and with bf16 matmul operands; the head's vocabulary in chunks of 128 (4
chunks at the smoke vocabulary) so that the rescaling runs. The test checks that these activations exercise what
the ones after one step do not: rows whose running max rises by >= 1 nat after the first chunk (the sum rescaled by
<= 1/e) and tanh past 0.5 (the softcap taking >= 25% off the gradient).

Tolerances against float64: fp32 1e-5 of the largest value (a few fp32 roundings; Newton-Schulz's five iterations
amplify them to ~3e-6); bf16 operands 2e-2 (a few bf16 roundings, 2^-8 = 3.9e-3 each) and 8e-2 for Newton-Schulz
(bf16 Newton-Schulz, torch's own included, lies 3-7% from float64).
"""

from __future__ import annotations

from contextlib import contextmanager

import pytest
import torch

from frontier.study.census import trained_activations, verify_trained
from frontier.kernels.verify import head_exercise, kernel_inputs


@contextmanager
def _one_thread():
    """The smoke model is tiny: one thread trains it fastest (on a busy 2-core machine a 2-thread pool took 10x)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def trained(smoke_data):
    with _one_thread():
        return verify_trained(smoke_data, steps=150, log=lambda *a: None)


def test_every_kernel_is_verified_on_trained_activations(trained):
    k = trained["kernels"]
    assert set(k) == {"rmsnorm_fwd", "rmsnorm_bwd", "rope_fwd", "rope_bwd", "mlp_fwd", "mlp_bwd", "head_ce_fwd",
                      "head_ce_bwd", "newton_schulz", "adamw"}
    for name, row in k.items():
        assert row["calls"] >= 1 and row["fp32"] < 1e-5, (name, row)
        if row["bf16"] is not None:
            assert row["bf16"] < (8e-2 if name == "newton_schulz" else 2e-2), (name, row)
    assert {n for n, r in k.items() if r["bf16"] is not None} == {"mlp_fwd", "mlp_bwd", "head_ce_fwd", "head_ce_bwd",
                                                                  "newton_schulz"}


def test_trained_activations_exercise_the_rescaling_and_the_saturation(trained, smoke_data):
    head = trained["head"]
    assert head["chunks"] == 4 and trained["vchunk"] == 128
    assert head["rescaled_fraction"] > 0.5 and head["max_rise_nats"] > 3
    assert head["max_abs_tanh"] > 0.5 and head["fraction_abs_tanh_over_half"] > 0.01
    # after a single step (near initialisation) neither happens
    with _one_thread():
        calls, _ = trained_activations(smoke_data, 1, log=lambda *a: None)
    (_, arrays, consts), = [c for op, args in calls if op == "head_softcap_cross_entropy"
                               for c in kernel_inputs(op, args)]
    early = head_exercise(arrays[0], arrays[1], consts["cap"], 128)
    assert early["rows_rescaled"] == 0 and early["max_abs_tanh"] < 0.1
