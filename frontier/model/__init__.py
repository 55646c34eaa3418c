"""The model: what is trained and scored.

`gpt` (the GPT: RMSNorm, RoPE, QK-norm, ReLU² MLP, optional gated attention, logit softcap), `bigram` (the hashed
bigram embedding), `ngram/` (the n-gram model counted from training tokens and mixed into the logits).

May import: the run's vocabulary, `frontier.data` and the fused ops (`frontier.kernels`). Never the optimisers,
the trainer or the study tools.
"""
