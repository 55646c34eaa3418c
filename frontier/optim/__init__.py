"""The optimisers: who updates which parameter, and how.

`adamw` (AdamW, its step the fused op `adamw_step`), `muon` (Muon: momentum, then Newton-Schulz), `bigram_update`
(the bigram table's dense update and the sparse row-wise fix), `optimizers` (`Optimizers`: every parameter to its
optimiser, the learning-rate schedule by elapsed share of the run).

May import: the run's vocabulary, the fused ops (`frontier.kernels`) and `frontier.model`. Never the trainer or the
study tools.
"""
