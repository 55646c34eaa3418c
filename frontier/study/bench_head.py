"""`frontier bench-head`: the fused head + softcap + cross-entropy op against plain PyTorch, side by side.

- `plain`: what a model without the op does (`plain_head_ce`): the logits hidden W^T made whole, (positions,
  vocabulary) in fp32, z = cap tanh(logits / cap) (+ the n-gram bias: a row for every position and 8 corrections
  scattered per position, as a training batch has it), `F.cross_entropy`; autograd keeps what its backward needs.
- `fused`: `frontier.kernels.ops.head_softcap_cross_entropy` with its reference implementation: rows in chunks of
  `CHUNK_ELEMENTS // V`, the backward recomputing each chunk's logits from hidden, W and the saved log-sum-exp.

Shapes are a profile's: positions = batch x seq_len, its width and vocabulary (`gpu` and `trn2`: 65,536 x 640 x
8,192). Each variant's forward + backward of the mean loss is timed in alternation, plain fused plain fused ...,
`repeats` rounds of `steps` calls, on the CPU. Peak memory: a fresh process per variant makes the inputs, reads its
resident memory, runs forward + backward once, and reports its peak resident memory minus that reading (after a
first small call, so that imports and op registration are not counted; the peak reset by /proc/self/clear_refs):
what the op and its backward add at their peak, the gradients of hidden and W included (both variants make them).
Both variants' losses and gradients are compared on the same inputs (`max_rel_diff`). The result is a bench record
(`frontier.study.bench_records.bench_record`, kind `bench-head`).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

from ..kernels import ops
from ..kernels.reference import CHUNK_ELEMENTS
from ..profiles import get_profile

from . import bench_records

VARIANTS = ("plain", "fused")
CORRECTIONS = 8  # n-gram corrections per position (frontier.model.ngram's top continuations)
CAP = 15.0


def plain_head_ce(hidden, w, targets, cap, bias_row=None, bias_tokens=None, bias_values=None) -> torch.Tensor:
    """Mean cross-entropy of cap tanh(hidden W^T / cap) (+ bias), the logits made whole: the unfused way."""
    z = cap * torch.tanh((hidden @ w.mT).float() / cap)
    if bias_row is not None:
        z = (z + bias_row).scatter_add(-1, bias_tokens, bias_values)
    return F.cross_entropy(z, targets)


def make_inputs(n: int, d: int, v: int, bias: bool, seed: int = 0) -> dict:
    """Leaf tensors of a head call: hidden (n, d), W (v, d), targets; with `bias`, a bias row and corrections."""
    g = torch.Generator().manual_seed(seed)
    x = {"hidden": torch.randn(n, d, generator=g).requires_grad_(),
         "w": (torch.randn(v, d, generator=g) * d**-0.5).requires_grad_(),
         "targets": torch.randint(0, v, (n,), generator=g)}
    if bias:
        x["bias_row"] = torch.randn(v, generator=g).requires_grad_()
        x["bias_tokens"] = torch.randint(0, v, (n, CORRECTIONS), generator=g)
        x["bias_values"] = torch.randn(n, CORRECTIONS, generator=g).requires_grad_()
    return x


def loss_of(variant: str, x: dict) -> torch.Tensor:
    bias = {k: x[k] for k in ("bias_row", "bias_tokens", "bias_values") if k in x}
    if variant == "plain":
        return plain_head_ce(x["hidden"], x["w"], x["targets"], CAP, **bias)
    return ops.head_softcap_cross_entropy(x["hidden"], x["w"], x["targets"], CAP, "reference", **bias).mean()


def step(variant: str, x: dict) -> torch.Tensor:
    """Forward + backward of the mean loss; the gradients land in the leaves' .grad (set afresh)."""
    for t in x.values():
        t.grad = None
    loss = loss_of(variant, x)
    loss.backward()
    return loss.detach()


def _leaves(x):
    return [t for t in x.values() if t.requires_grad]


def agreement(n, d, v, bias) -> float:
    """Largest |plain - fused| over the loss and every gradient, relative to the largest |plain| of each."""
    x = make_inputs(n, d, v, bias)
    a = [step("plain", x)] + [t.grad.clone() for t in _leaves(x)]
    b = [step("fused", x)] + [t.grad.clone() for t in _leaves(x)]
    return max(float((p - q).abs().max() / p.abs().max().clamp_min(1e-30)) for p, q in zip(a, b))


def peak_memory_child(variant: str, n: int, d: int, v: int, bias: bool) -> dict:
    """Resident MiB a fresh process adds at its peak for one forward + backward of `variant`."""
    code = (
        "import json, sys\n"
        "from frontier.study.bench_head import make_inputs, step\n"
        "def status(key): return int([l for l in open('/proc/self/status') if l.startswith(key)][0].split()[1])\n"
        "variant, n, d, v, bias = sys.argv[1], *map(int, sys.argv[2:6])\n"
        "step(variant, make_inputs(128, d, v, bool(bias)))  # first-call costs (imports, op registration) first\n"
        "x = make_inputs(n, d, v, bool(bias))\n"
        "open('/proc/self/clear_refs', 'w').write('5')  # VmHWM back to the current resident size\n"
        "before = status('VmRSS:')\n"
        "step(variant, x)\n"
        "print(json.dumps({'before_mib': before / 1024, 'peak_mib': status('VmHWM:') / 1024}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, variant, str(n), str(d), str(v), str(int(bias))],
                         capture_output=True, text=True, check=True)
    m = json.loads(out.stdout.strip().splitlines()[-1])
    return {**m, "extra_peak_mib": m["peak_mib"] - m["before_mib"]}


def run_head_bench(profiles: list[str], steps: int = 1, repeats: int = 3, memory: bool = True, log=print,
                   out=None, command: list[str] | None = None) -> dict:
    """Plain against fused at each profile's shapes, the n-gram bias off and on (see the module docstring)."""
    arguments = {"profiles": list(profiles), "steps": steps, "repeats": repeats, "memory": memory}
    path = bench_records.new_record_path(out, "bench-head", profiles) if out is not None else None
    cases = []
    for name in profiles:
        p = get_profile(name)
        n, d, v = p.batch_size * p.seq_len, p.n_embd, p.vocab_size
        for bias in (False, True):
            case = {"profile": name, "positions": n, "width": d, "vocab": v, "bias": bias,
                    "chunk_rows": max(1, min(n, CHUNK_ELEMENTS // v)), "logits_mib": n * v * 4 / 2**20}
            x = make_inputs(n, d, v, bias)
            for variant in VARIANTS:  # warm-up
                step(variant, x)
            ms = {k: [] for k in VARIANTS}
            for _ in range(repeats):
                for variant in VARIANTS:
                    t0 = time.perf_counter()
                    for _ in range(steps):
                        step(variant, x)
                    ms[variant].append(1000 * (time.perf_counter() - t0) / steps)
            del x
            case["ms"] = ms
            case["ms_median"] = {k: statistics.median(s) for k, s in ms.items()}
            case["time_ratio"] = case["ms_median"]["fused"] / case["ms_median"]["plain"]
            case["max_rel_diff"] = agreement(n, d, v, bias)
            if memory:
                case["memory"] = {k: peak_memory_child(k, n, d, v, bias) for k in VARIANTS}
                case["memory_ratio"] = (case["memory"]["plain"]["extra_peak_mib"]
                                        / case["memory"]["fused"]["extra_peak_mib"])
            cases.append(case)
            log(format_case(case))
    return bench_records.bench_record("bench-head", arguments, command, f"{__name__}.run_head_bench", {"cases": cases},
                                path, cpu=True)


def format_case(c: dict) -> str:
    mem = ""
    if "memory" in c:
        m = c["memory"]
        mem = (f"; extra peak MiB plain {m['plain']['extra_peak_mib']:,.0f}, fused {m['fused']['extra_peak_mib']:,.0f} "
               f"(plain / fused {c['memory_ratio']:.1f}x)")
    t = c["ms_median"]
    return (f"{c['profile']}: {c['positions']:,} positions x {c['width']} -> {c['vocab']:,}, n-gram bias "
            f"{'on' if c['bias'] else 'off'}: ms plain {t['plain']:,.0f}, fused {t['fused']:,.0f} (fused / plain "
            f"{c['time_ratio']:.2f}x){mem}; max rel diff {c['max_rel_diff']:.1e}")


def format_head_bench(result: dict) -> str:
    return "\n".join(["fused head + softcap + cross-entropy against plain PyTorch, forward + backward, CPU, median "
                      "of alternating rounds"] + [format_case(c) for c in result["cases"]])
