"""The data: documents in, token shards and batches out.

`corpus` (documents: the embedded corpora every Python carries, the docstrings of pinned packages, and the user's
files), `tokenizer` (a lossless BPE, bytes per token), `shards` (the parameter-golf shard format), `audit` (the
near-duplicate audit of the held-out splits), `dataset` (prepare a dataset folder with its train, val and test
splits, open one, the profile's data), `loader` (training batches, folds and evaluation windows).

May import: the run's vocabulary (`frontier.config`, `profiles`, `errors`). Never the model, the trainer or the
study tools.
"""
