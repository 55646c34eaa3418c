"""The data: documents in, token shards and batches out.

`corpus` (documents: the embedded corpora every Python carries, and the user's files), `tokenizer` (a lossless BPE,
bytes per token), `shards` (the parameter-golf shard format), `dataset` (prepare a dataset folder, open one, the
profile's data), `loader` (training batches, folds and evaluation windows).

May import: the run's vocabulary (`frontier.config`, `profiles`, `errors`). Never the model, the trainer or the
study tools.
"""
