"""The roofline prices the kernels' matmuls at the TensorE rate of the dtype they run at (issue 28.5): bf16 operands,
79 TFLOP/s, not fp32's 20 (frontier/kernels/roofline.py: `kernel_matmul_peak`, the default of `format_roofline`)."""

from __future__ import annotations

import json
from pathlib import Path

from frontier.study.roofline import PEAKS, format_roofline, kernel_matmul_peak

RECORDS = Path(__file__).parent.parent / "runs" / "trn2" / "bench"


def test_the_kernels_run_their_matmuls_at_the_bf16_peak():
    assert kernel_matmul_peak() == "bf16" and PEAKS.tensor_flops["bf16"] == 79e12


def test_format_roofline_defaults_to_the_record_s_kernel_peak():
    old = json.loads(sorted(RECORDS.glob("roofline-trn2+10x640-*.json"))[0].read_text())
    assert "kernel_matmul_peak" not in old  # made before the kernels had bf16 operands: priced as it was (fp32)
    assert "matmuls at the fp32 peak" in format_roofline(old)
    new = {**old, "kernel_matmul_peak": kernel_matmul_peak()}
    assert "matmuls at the bf16 peak" in format_roofline(new)
    assert format_roofline(new) == format_roofline(old, "bf16")
