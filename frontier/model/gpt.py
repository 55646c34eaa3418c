"""The GPT: the competition baseline's family, one readable screen per idea.

- RMSNorm without learned weights, before attention, before the MLP, on the embedding and before the head.
- Attention with rotary position embeddings (RoPE) and RMS-normalised queries and keys (QK-norm); optional
  grouped KV heads; optional per-head sigmoid gate on the attention output (gated attention).
- MLP with ReLU² (relu(x) squared), 4x wide.
- Untied token embedding and head; logits soft-capped at `cap * tanh(z / cap)`.
- Optional extras a recipe switches on: the hashed bigram embedding (`frontier.model.bigram`) added to the token
  embedding, and the n-gram bias (`frontier.model.ngram`) added to the capped logits before the one softmax.

RMSNorm, RoPE, the MLP and the head + softcap + cross-entropy are the fused ops of `frontier.kernels.ops`; `kernels`
(the run's `TrainConfig.kernels`) says which implementation runs them (PyTorch, the NKI kernels, or those kernels
in the interpreter). Attention is PyTorch's SDPA.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..config import ModelConfig
from ..kernels import ops


class Rotary(nn.Module):
    """cos/sin tables (max_seq_len, head_dim / 2) for rotating pairs of channels by an angle that grows with the
    position."""

    def __init__(self, head_dim: int, max_seq_len: int, base: float, kernels: str = "reference"):
        super().__init__()
        inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)
        self.kernels = kernels

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, T, H, hd)
        return ops.rotary(x, self.cos, self.sin, self.kernels)


class CausalSelfAttention(nn.Module):
    GATE_INPUTS = 12  # the gate reads the first few channels of the block input

    def __init__(self, cfg: ModelConfig, rotary: Rotary, kernels: str = "reference"):
        super().__init__()
        self.kernels = kernels
        self.n_head, self.n_kv_head, self.head_dim = cfg.n_head, cfg.n_kv_head, cfg.head_dim
        self.c_q = nn.Linear(cfg.n_embd, cfg.n_head * self.head_dim, bias=False)
        self.c_k = nn.Linear(cfg.n_embd, cfg.n_kv_head * self.head_dim, bias=False)
        self.c_v = nn.Linear(cfg.n_embd, cfg.n_kv_head * self.head_dim, bias=False)
        self.c_proj = nn.Linear(cfg.n_head * self.head_dim, cfg.n_embd, bias=False)
        # Gated attention: g = 2 * sigmoid(W x[:12]) per head; W starts at zero, so g starts at 1.
        self.gate = nn.Linear(self.GATE_INPUTS, cfg.n_head, bias=False) if cfg.attn_gate else None
        self.rotary = rotary

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        q = self.c_q(x).view(B, T, self.n_head, self.head_dim)
        k = self.c_k(x).view(B, T, self.n_kv_head, self.head_dim)
        v = self.c_v(x).view(B, T, self.n_kv_head, self.head_dim)
        q, k = ops.rmsnorm(self.rotary(q), self.kernels), ops.rmsnorm(self.rotary(k), self.kernels)
        y = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
            is_causal=True, enable_gqa=self.n_kv_head != self.n_head,
        ).transpose(1, 2)  # (B, T, H, hd)
        if self.gate is not None:
            y = y * (2 * torch.sigmoid(self.gate(x[..., : self.GATE_INPUTS])))[..., None]
        return self.c_proj(y.reshape(B, T, -1))


class MLP(nn.Module):
    """relu(x W_fc^T)^2 W_proj^T, one fused op (`c_fc` and `c_proj` hold the weights)."""

    def __init__(self, cfg: ModelConfig, kernels: str = "reference"):
        super().__init__()
        self.kernels = kernels
        self.c_fc = nn.Linear(cfg.n_embd, cfg.mlp_ratio * cfg.n_embd, bias=False)
        self.c_proj = nn.Linear(cfg.mlp_ratio * cfg.n_embd, cfg.n_embd, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ops.relu2_mlp(x, self.c_fc.weight, self.c_proj.weight, self.kernels)


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, rotary: Rotary, kernels: str = "reference"):
        super().__init__()
        self.kernels = kernels
        self.attn = CausalSelfAttention(cfg, rotary, kernels)
        self.mlp = MLP(cfg, kernels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(ops.rmsnorm(x, self.kernels))
        return x + self.mlp(ops.rmsnorm(x, self.kernels))


class GPT(nn.Module):
    def __init__(self, cfg: ModelConfig, max_seq_len: int, batch_size: int = 1, kernels: str = "reference"):
        super().__init__()
        self.cfg, self.kernels = cfg, kernels
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        rotary = Rotary(cfg.head_dim, max_seq_len, cfg.rope_base, kernels)
        self.blocks = nn.ModuleList([Block(cfg, rotary, kernels) for _ in range(cfg.n_layer)])
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.bigram = None
        if cfg.bigram is not None:
            from .bigram import BigramEmbedding

            self.bigram = BigramEmbedding(cfg.bigram, cfg.n_embd, (batch_size, max_seq_len))
        self.ngram = None
        if cfg.ngram is not None:
            from .ngram import NGramMix

            self.ngram = NGramMix(cfg.ngram, cfg.vocab_size, cfg.n_embd)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        nn.init.normal_(self.wte.weight, std=1.0)
        nn.init.normal_(self.lm_head.weight, std=0.001)
        for block in self.blocks:
            for lin in (block.attn.c_q, block.attn.c_k, block.attn.c_v, block.mlp.c_fc):
                bound = 3**0.5 * lin.in_features**-0.5  # uniform with std 1/sqrt(fan_in)
                nn.init.uniform_(lin.weight, -bound, bound)
            nn.init.zeros_(block.attn.c_proj.weight)  # every block starts as the identity
            nn.init.zeros_(block.mlp.c_proj.weight)
            if block.attn.gate is not None:
                nn.init.zeros_(block.attn.gate.weight)

    def hidden(self, idx: torch.Tensor) -> torch.Tensor:
        """The normalised last hidden state (B, T, n_embd): what the head reads."""
        x = self.wte(idx)
        if self.bigram is not None:
            x = x + self.bigram(idx)
        x = ops.rmsnorm(x, self.kernels)
        for block in self.blocks:
            x = block(x)
        return ops.rmsnorm(x, self.kernels)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None, reduction: str = "mean",
                fold: int | None = None) -> torch.Tensor:
        """With `targets`: the cross-entropy in nats, a scalar (`mean`) or one value per position (`none`, shape
        (B, T)), computed by the fused head without building the logits. Without: the logits (B, T, V), capped, in
        float32, with the n-gram bias where the model has one. `fold`: which fold of the training data the batch
        comes from (None when evaluating), for the n-gram bias."""
        if targets is None:
            h = self.hidden(idx)
            z = self._capped_logits(h)
            return self.ngram.add_to(z, idx, fold, hidden=h) if self.ngram is not None else z
        # The "hidden" mixer weighs the counts by the network's state: its bias waits for the network.
        h = self.hidden(idx) if self.ngram is not None and self.ngram.reads_hidden else None
        bias = {}
        if self.ngram is not None and fold is not None:
            # A training batch's bias, in sparse form; with the other mixers it depends on the tokens only, and
            # computing it first keeps the rest of the model one graph when compiled (the bias itself runs eagerly).
            log_p0, toks, corr = self.ngram.bias_parts(idx, fold, h)
            bias = dict(bias_row=log_p0, bias_tokens=toks.flatten(0, 1), bias_values=corr.flatten(0, 1))
        elif self.ngram is not None:  # evaluation: dense, over the folds' average
            bias = dict(bias_dense=self.ngram.bias(idx, hidden=h).flatten(0, 1))
        h = self.hidden(idx) if h is None else h
        loss = ops.head_softcap_cross_entropy(h.flatten(0, 1), self.lm_head.weight, targets.reshape(-1),
                                              self.cfg.logit_softcap, self.kernels, **bias)
        return loss.view(targets.shape) if reduction == "none" else loss.mean()

    def _capped_logits(self, h: torch.Tensor) -> torch.Tensor:
        cap = self.cfg.logit_softcap
        return cap * torch.tanh(self.lm_head(h).float() / cap)

    @torch.no_grad()
    def logits(self, idx: torch.Tensor, fold: int | None = None) -> torch.Tensor:
        """`forward(idx)` without gradients, for looking at predictions (generation, inspection)."""
        return self(idx, fold=fold)

    @torch.no_grad()
    def network_logits(self, idx: torch.Tensor) -> torch.Tensor:
        """The network's own capped float32 logits (B, T, V), without the n-gram bias (for inspection)."""
        return self._capped_logits(self.hidden(idx))

    def num_params(self) -> int:
        """Trained parameters (the bigram update's gradient sink is not a weight)."""
        return sum(p.numel() for n, p in self.named_parameters() if not n.endswith(".sink"))
