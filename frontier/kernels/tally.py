"""The call counts of the fused ops, per (op or `op.backward`, implementation), as they run (`ops.calls()`).

Kept apart from `ops` so that `neuron` can count its kernel launches as they run without importing `ops` (which
imports the implementations): on the neuron device the model's traced code calls the registered `nki_op` ops
directly, and each counts itself in its body, when it runs, not when a graph is traced.
"""

from collections import Counter

CALLS: Counter = Counter()  # (op or op.backward, implementation) -> calls
LOGITS = "head_softcap_cross_entropy_logits"  # the head's backward: "kept" or "recomputed" logits
