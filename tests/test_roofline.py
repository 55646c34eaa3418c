"""The roofline cost model: what it counts (aten ops, kernels, the step) and how it prices them."""

import json

import pytest
import torch

from frontier.cli import main
from frontier.kernels.interpreter import Counts
from frontier.recipes import resolve
from frontier.study import roofline as rf


class _Capture(torch.utils._python_dispatch.TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.units = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.units.append((func._opname, rf.aten_unit(func, args, kwargs or {}, out)))
        return out


def test_an_aten_op_is_a_round_trip_and_a_view_is_free():
    a, b = torch.empty(64, 32, device="meta"), torch.empty(32, 16, device="meta")
    with _Capture() as cap:
        c = a @ b
        c.t()
        torch.tanh(c)
    units = dict(cap.units)
    mm = units["mm"]
    assert mm.matmul_flops == 2 * 64 * 32 * 16
    assert mm.hbm_bytes == 4 * (64 * 32 + 32 * 16 + 64 * 16) and mm.dma_transfers == 3
    assert units["t"] is None  # a view moves nothing
    th = units["tanh"]
    assert th.instructions["scalar"] == 1 and th.free_elements["scalar"] == 64 * 16 // 128
    assert th.hbm_bytes == 2 * 4 * 64 * 16


def test_engine_times_follow_the_documented_formulas():
    w = rf.Work(matmul_flops=2e9, hbm_bytes=368e6, dma_transfers=16)
    w.instructions.update(tensor=10, vector=100, scalar=0, gpsimd=0)
    w.free_elements.update(vector=1_920_000)
    t = rf.engine_times(w)
    assert t["tensor"] == pytest.approx(2e9 / 20e12 + 10 * 64 / 2.4e9)
    assert t["vector"] == pytest.approx((1_920_000 / 2 + 100 * 64) / 0.96e9)
    assert t["dma"] == pytest.approx(1e-3 + 16 * 1.3e-6 / 16)
    assert rf.unit_time(w) == max(t.values()) == t["vector"]
    assert rf.engine_times(w, matmul_peak="bf16")["tensor"] == pytest.approx(2e9 / 79e12 + 10 * 64 / 2.4e9)


def test_counts_become_work():
    c = Counts(hbm_read_bytes=100, hbm_write_bytes=20, dma_transfers=3, matmul_flops=7)
    c.instruction("vector", 256, 2)
    w = rf.from_counts(c)
    assert (w.hbm_bytes, w.dma_transfers, w.matmul_flops, w.free_elements["vector"]) == (120, 3, 7, 2)


def test_the_traced_step_sees_every_fused_call_and_attention():
    cfg = resolve("baseline", "smoke")
    L = cfg.model.n_layer
    units = rf.trace_step(cfg)
    fused = [u.op for u in units if u.kind == "fused"]
    assert fused.count("rmsnorm") == fused.count("rmsnorm_backward") == 4 * L + 2
    assert fused.count("rotary") == 2 * L and fused.count("relu2_mlp_backward") == L
    assert fused.count("head_softcap_cross_entropy") == 1 and "adamw_step" in fused and "newton_schulz" in fused
    attn = [u for u in units if u.kind == "attention"]
    assert [u.op for u in attn] == ["forward"] * L + ["backward"] * L
    glue = [u.op for u in units if u.kind == "glue"]
    assert "mm" in glue and not any(op.startswith("_scaled_dot_product") for op in glue)  # SDPA is modelled


def test_kernel_and_reference_counts_of_rmsnorm():
    """The RMSNorm kernel reads x once and writes y once; its reference makes several round trips."""
    x = torch.empty(4, 64, 96, device="meta")
    func = torch.ops.frontier.rmsnorm.default
    ker, kernels, _ = rf.kernel_work(func, (x, None, "reference"), {}, vocab=10)
    assert ker.hbm_bytes == 2 * x.numel() * 4 and kernels["rmsnorm_fwd"] == 1
    ref = rf.reference_work(func, (x, None, "reference"), {})
    assert ref.work.hbm_bytes >= ker.hbm_bytes and sum(ref.ops.values()) >= 1


def test_newton_schulz_on_a_stack_counts_one_matrix_times_the_stack():
    g = torch.empty(3, 64, 128, device="meta")
    func = torch.ops.frontier.newton_schulz.default
    one, _, _ = rf.kernel_work(func, (g[:1], 5, "reference"), {}, vocab=10)
    three, kernels, _ = rf.kernel_work(func, (g, 5, "reference"), {}, vocab=10)
    assert three.matmul_flops == 3 * one.matmul_flops and three.hbm_bytes == 3 * one.hbm_bytes
    assert kernels["newton_schulz"] == 3


def test_the_predicted_step_is_the_sum_of_its_rows_and_the_layers_add_up(tmp_path):
    r = rf.roofline("smoke", log=lambda *a: None)
    for peak, p in r["predictions"].items():
        assert sum(row["ref_s"] for row in p["rows"]) == pytest.approx(p["core_step_s"]["reference"])
        assert sum(row["kernel_s"] for row in p["rows"]) == pytest.approx(p["core_step_s"]["kernel"])
        assert p["chip_step_s"]["kernel"] == pytest.approx(p["core_step_s"]["kernel"] / 8)
        per = p["per_layer_core_s"]["kernel"]
        fixed = p["core_step_s"]["kernel"] - r["shapes"]["n_layer"] * per
        assert fixed + p["layers_at_reference_step"] * per == pytest.approx(p["core_step_s"]["reference"])
        glue = next(row for row in p["rows"] if row["kind"] == "glue")
        assert glue["ref_s"] == glue["kernel_s"] and glue["ref_bytes"] == glue["kernel_bytes"]  # same both ways


def test_roofline_record_is_found_again_and_the_cli_writes_one(tmp_path, capsys):
    assert rf.find_record(tmp_path, "smoke") is None
    rec = rf.roofline_record("smoke", tmp_path, log=lambda *a: None)
    again = rf.roofline_record("smoke", tmp_path, log=lambda *a: None)
    assert again["path"] == rec["path"] and again["created"] == rec["created"]  # read back, not recomputed
    assert rf.find_record(tmp_path, "smoke", n_layer=3) is None
    assert main(["kernels", "--roofline", "smoke", "--layers", "3", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "predicted by a cost model, not measured" in out and "3 layers x 64" in out
    found = rf.find_record(tmp_path, "smoke", n_layer=3)
    assert found is not None and found["command"][:3] == ["frontier", "kernels", "--roofline"]
    assert json.loads(open(found["path"]).read())["code"]["git_sha"]
    taken = tmp_path / "taken.json"
    taken.write_text("{}")  # a record is never overwritten, and the refusal comes before the computing
    assert main(["kernels", "--roofline", "smoke", "--out", str(taken)]) == 2
    assert "already exists" in capsys.readouterr().err and taken.read_text() == "{}"
