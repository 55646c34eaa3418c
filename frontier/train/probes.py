"""Speed probes: fixed workloads that stand for a training step, timed to tell how fast the machine is right now.

The reference clock (`frontier.train.clock`) charges each step `wall seconds x reference probe time / probe time
now`: on a machine (or in an hour) where the probe takes twice as long, a step is charged half as much. For that
to mean anything a probe must never change:

- A probe is written once and never edited. A changed workload is a new probe with a new name (`gpt-step-2`),
  added beside the old one; the profiles' reference times (`frontier.profiles`) belong to one probe each. Every
  record names the probe and the hash of its function's source (`source_hash`), so an edit cannot pass unseen.
- A probe is plain PyTorch and calls nothing of the package's model, optimisers or kernels: making the model
  faster must still buy steps, not make the probe (and so the charge) faster with it.

`gpt-step-1` is one transformer block and the output head at a profile's shapes (batch x sequence positions,
width, heads, vocabulary): RMS normalisation, the query/key/value and output projections, causal attention with an
explicit softmax, a squared-ReLU MLP of four times the width, the head's matmul, a softcap and cross-entropy,
forward and backward, then a plain SGD update of its weights. Its inputs and weights come from a fixed seed. On
the `cpu` profile it does roughly the work of one of the baseline's three blocks plus its head, about a fifth of
a step, in the same proportions of matmul, elementwise and softmax work.
"""

from __future__ import annotations

import hashlib
import inspect
import statistics
import time
from dataclasses import dataclass
from typing import Callable

from ..errors import UserError


@dataclass(frozen=True)
class ProbeShapes:
    """The shapes a probe runs at: a profile's (never a size sweep's: the reference time is the profile's)."""

    batch_size: int
    seq_len: int
    n_embd: int
    n_head: int
    vocab_size: int

    @classmethod
    def of(cls, profile) -> "ProbeShapes":
        return cls(profile.batch_size, profile.seq_len, profile.n_embd, profile.n_head, profile.vocab_size)


def gpt_step_1(shapes: ProbeShapes, seed: int = 1234) -> Callable[[], None]:
    """Probe `gpt-step-1` (never edit: write `gpt_step_2` instead). Returns the workload, built (weights and
    inputs made once); each call runs it once: forward, backward and an update of one block and the head."""
    import torch

    g = torch.Generator().manual_seed(seed)
    b, t, d, h, v = shapes.batch_size, shapes.seq_len, shapes.n_embd, shapes.n_head, shapes.vocab_size
    hd = d // h

    def weight(*shape):
        return (torch.randn(*shape, generator=g) * shape[-1] ** -0.5).requires_grad_(True)

    w_qkv, w_o, w_up, w_down, w_head = weight(3 * d, d), weight(d, d), weight(4 * d, d), weight(d, 4 * d), weight(v, d)
    params = [w_qkv, w_o, w_up, w_down, w_head]
    x0 = torch.randn(b, t, d, generator=g)
    targets = torch.randint(0, v, (b * t,), generator=g)
    mask = torch.full((t, t), float("-inf")).triu(1)

    def norm(x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)

    def step():
        x = x0
        q, k, val = (norm(x) @ w_qkv.t()).split(d, dim=-1)
        q, k, val = (z.view(b, t, h, hd).transpose(1, 2) for z in (q, k, val))
        att = torch.softmax((q @ k.transpose(-2, -1)) * hd ** -0.5 + mask, dim=-1)
        x = x + (att @ val).transpose(1, 2).reshape(b, t, d) @ w_o.t()
        x = x + torch.relu(norm(x) @ w_up.t()).square() @ w_down.t()
        logits = norm(x).view(b * t, d) @ w_head.t()
        logits = 15.0 * torch.tanh(logits / 15.0)
        loss = torch.nn.functional.cross_entropy(logits, targets)
        loss.backward()
        with torch.no_grad():
            for p in params:
                p.sub_(p.grad, alpha=1e-4)
                p.grad = None

    return step


PROBES: dict[str, Callable[[ProbeShapes], Callable[[], None]]] = {"gpt-step-1": gpt_step_1}


def get_probe(name: str) -> Callable[[ProbeShapes], Callable[[], None]]:
    try:
        return PROBES[name]
    except KeyError:
        raise UserError(f"unknown speed probe {name!r}", f"choose one of {', '.join(PROBES)} "
                        "(frontier.train.probes)") from None


def source_hash(name: str) -> str:
    """A hash of the probe function's source: a record names it beside the probe's name."""
    return hashlib.sha256(inspect.getsource(get_probe(name)).encode()).hexdigest()[:16]


def time_probe(name: str, shapes: ProbeShapes, repeats: int = 3) -> dict:
    """Time probe `name` at `shapes`: build it, run it once untimed (warm-up), then `repeats` timed runs. Returns
    `probe_s` (the median of the timed runs) and `repeats_s` (each one), in seconds of wall time."""
    step = get_probe(name)(shapes)
    step()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return {"probe_s": statistics.median(times), "repeats_s": times}
