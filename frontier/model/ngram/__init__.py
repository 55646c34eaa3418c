"""The n-gram model: counted from training tokens during the run, mixed into the logits as a learned bias.

What the tables hold (all bounded, allocated once; `table_mib()` reports their size):
- context length 0: unigram counts (add-one smoothed), a dense vector over the vocabulary;
- context length 1: for every token, its total N, its number of distinct continuations T, and its
  `slots_short` most frequent continuations with their counts;
- context lengths 2..K (K = `max_order`, 16 by default): contexts hashed into `2**buckets_log2` buckets per
  length, each with N, T and its `slots` most frequent continuations.
A continuation enters a full set of slots when its count in a batch beats the smallest slot. Whatever a context
counted that is not in a slot joins its back-off mass, so every distribution below still sums to 1.

Smoothing (`NGramConfig.smoothing`), interpolated: every method writes the distribution of a context c of length
k as P_k(. | c) = a_k P_{k-1}(. | c') + s_k, with s_k non-zero only on the context's slots and a_k the escape, so
that each P_k is a proper distribution over the whole vocabulary (a_k + sum s_k = 1). Let c be seen N times with T
distinct continuations, L = sum of its slots' counts and U = N - L the mass of the continuations it keeps no slot
for (always part of the escape: it backs off to the shorter context). A context never seen backs off entirely.
- "witten-bell" (the default; PPM's escape method C):
      P_k(w | c) = (count(c, w) + T * P_{k-1}(w | c')) / (N + T),
  s_k = count/(N + T), a_k = (T + U)/(N + T): a context seen once gives its continuation half of the mass.
  T comes from the seen set (`seen_log2` bits, one per hashed (context, token) pair), which under-counts where two
  pairs share a bit: a context whose every continuation collided has T = 0, no escape, and P_k = 0 outside its
  slots (`frontier ngram-orders` shows it). Inside the learned mixture every length keeps a positive weight, so
  P_mix stays positive; the other smoothings do not read T.
- "absolute" (interpolated absolute discounting, one discount D_k per context length k):
      P_k(w | c) = max(count(c, w) - D_k, 0)/N + (D_k * T_listed + U)/N * P_{k-1}(w | c'),
  T_listed the number of the context's slots in use (what is taken off the slots is the back-off mass, so it sums
  to 1). D_k = n1/(n1 + 2 n2) (Ney, Essen and Kneser), n_r the number of slots of length k holding count r in the
  tables read (the count-of-counts of the listed continuations: the unlisted ones have no counts of their own).
- "absolute-modified" (modified Kneser-Ney's three discounts, Chen and Goodman): D(count) = D1, D2 or D3+ for a
  count of 1, 2 or >= 3, with Y = n1/(n1 + 2 n2), D1 = 1 - 2Y n2/n1, D2 = 2 - 3Y n3/n2, D3+ = 3 - 4Y n4/n3,
      P_k(w | c) = (count(c, w) - D(count(c, w)))/N + (sum_listed D(count) + U)/N * P_{k-1}(w | c').
  Not Kneser-Ney: its lower orders count distinct left contexts per (shorter context, token), which these tables
  do not keep (a slot holds occurrences only), so the shorter contexts keep their ordinary distributions here.
Every discount is clipped to [0.05, r] for a count r (an estimate from few slots can fall outside, and a positive
discount keeps every escape, hence every probability, positive); the discounts are estimated per fold and per
length from the tables (`discounts`) and recomputed only after the tables change.
The unigram (length 0) is add-one smoothed under every method.

The mixture: P_mix = sum_k pi_k P_k over context lengths 0..K, pi = softmax of K+1 learned logits. Unrolled,
    P_mix = coef_0 * P_0 + sum_{k>=1} coef_k * s_k,   coef_K = pi_K,  coef_k = pi_k + a_{k+1} coef_{k+1},
one position-independent dense vector (the unigram) times a per-position scalar, plus a few scattered entries.
With `mixer="counts"` the weights depend on the context: per position, pi = softmax(mix_logits + W f + b) and
scale = scale + (W f + b)_last, f the position's count features per context length 1..K (`count_features`:
whether the context is known, log(1 + N)/8 and T/(N + T)), W and b one small linear layer (3K inputs, K + 2
outputs) that starts at zero, so the mixing starts as the global one. It reads the tables only, never the
network, so `ngram-only` can use it and the bias still depends on the tokens alone.

The bias, from the tokens up to and including position t and from the tables only, over the whole vocabulary,
added to the network's logits before the one softmax:
    bias = (1 - scale) * log floor + scale * log P_mix,    floor = coef_0 * P_0,
a log-linear interpolation between the n-gram distribution and the part of it that backed off to the unigram,
with `scale` learned (scale = 1: the n-gram distribution itself). For every token without an entry P_mix(w)
equals its floor, so up to a per-position constant (log coef_0, which the softmax cancels exactly) the bias is
the dense vector log P_0 plus, at the entries' tokens only, scale * log(P_mix(w) / floor(w)). Training batches
take that sparse form: nothing of size (batch, sequence, vocabulary) is built besides the logits themselves, and
nothing learned multiplies the dense vector. Evaluation computes the same formula densely (it is not charged).

Cross-fitting (`folds`, 2 by default): window i of the training split belongs to fold i mod folds, each training
batch comes from one fold and reads only another fold's tables, so the mixture never learns from counts that
already hold the batch's own continuations (which happens as soon as a run sees its data twice). Evaluation reads
the average of the folds' distributions (and of their floors), each counted from its share of the training text;
with `eval_counts="all"` it reads one more table set instead, counted from every training window beside the
folds' (`observe` counts a batch into its fold's tables and that one; the counting is charged as the rest is), so
that evaluation sees counts of the whole split.

Check bits (`check_bits` > 0; 0, the default, keeps none): every bucket of a context length >= 2 also holds a
fingerprint of the context it counts, `check_bits` bits of a second mixing of the context's 64-bit hash (never 0:
0 marks an empty bucket). The first context counted into an empty bucket claims it (several new contexts of one
batch racing for it: the one with the most positions in the batch, ties to the smaller fingerprint); counts of
any other context that lands there are dropped at that length (`summary()` reports how many), and reading such a
context finds it unseen, so it backs off, instead of taking the owner's counts. Without check bits a bucket keeps
no record of whose counts it holds: an unseen context in an occupied bucket reads its occupant's counts (a false
hit; `false_hit_rate` measures how often on the validation split).

Counting never sees validation tokens: the trainer feeds `observe` the training batches (after the step that used
them, so a batch's own targets never reach its bias), or `count_tokens` the training shards.

How counting runs. Tables on the CPU are counted in NumPy (`_observe_np`): per table group one sort of the batch's
(context row, next token) pairs gives the distinct pairs, their counts and each context's segment; the new
continuations of a context are ranked once (the original re-ranked them every replacement round, the same ranks
shifted); a row's slot flags are read as one packed integer. `count_tokens` counts each fold on its own thread
(folds share no table; NumPy releases the GIL). Tables elsewhere (an accelerator) are counted by `_observe_torch`,
the counting as first written. Both give the same tables bit for bit (tests/test_ngram_counting.py compares every
buffer with a copy of the original); `frontier bench-ngram` times them side by side.

Counting beside an accelerator at Trn2 scale (a design note; nothing here was measured on a Trn2). At the trn2
profile (2**20 buckets per length, a 2**28 seen set) the tables are about 1.7 GiB, read and written at random
per pair (a slot row, a context, a seen flag): host work that a NeuronCore's matrix units do not help with, in
memory the model would otherwise have. The plan is to count on the host, overlapped with the steps: the batch of
step s goes to a counting thread once step s has used it (stream counting), and a batch of fold f reads only the
other fold's tables, so counting fold f never races a read of fold f. Overlap holds while host counting keeps up
with the run's token rate (32 x 2,048 tokens per step / seconds per step); shard counting up front
(`count_tokens`, charged to the budget) costs (train tokens) / (tokens/s) seconds, which at billions of tokens and
the rates `frontier bench-ngram` reports here does not fit a 1,800 s budget. Counting on the device (sort and
segment ops) stays possible through `_observe_torch`, at the price of device time and memory every step.

Where the parts live: `hashing` (context hashes, buckets, check-bit fingerprints, the packed layout), `counting`
(tables filled from batches and shards, in torch and NumPy), `smoothing` (the back-off formulas and discounts),
`mix` (`NGramMix`: the tables, the mixture and the bias; `NGramOnly`), `checks` (false hits, per-position
explanations). This package may import `frontier.config` and `frontier.data.dataset`, never the study tools.
"""

from .checks import explain_positions, false_hit_rate
from .counting import shard_batches
from .mix import NGramMix, NGramOnly

__all__ = ["NGramMix", "NGramOnly", "explain_positions", "false_hit_rate", "shard_batches"]
