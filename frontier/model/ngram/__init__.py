"""The n-gram model: counted from training tokens during the run, mixed into the logits as a learned bias.

Bounded tables per context length (a unigram, every token's continuations, hashed longer contexts with optional
check bits), each length smoothed and backed off to the next shorter one, mixed by learned weights (global, or per
position from the counts), read by a batch only from another fold's tables (cross-fitting) and never from
validation tokens. docs/ngram.md gives the formulas, the counting and the plan for Trn2 scale.

Where the parts live: `hashing` (context hashes, buckets, check-bit fingerprints, the packed layout), `counting`
(tables filled from batches and shards, in torch and NumPy), `smoothing` (the back-off formulas and discounts),
`mix` (`NGramMix`: the tables, the mixture and the bias; `NGramOnly`), `checks` (false hits, per-position
explanations). This package may import `frontier.config` and `frontier.data.dataset`, never the study tools.
"""

from .checks import explain_positions, false_hit_rate
from .counting import shard_batches
from .mix import NGramMix, NGramOnly

__all__ = ["NGramMix", "NGramOnly", "explain_positions", "false_hit_rate", "shard_batches"]
