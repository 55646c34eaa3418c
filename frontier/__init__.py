"""frontier: a language model trained from scratch under a wall-clock budget, as a package and a book.

Modules, one concept each: `corpus` (documents), `tokenizer`, `shards`, `data` (prepare/open a dataset),
`dataloader`, `gpt` (the model), `muon`, `optim`, `bigram`, `ngram`, `bpb` (the metric), `clock`, `trainer`,
`records`, `compare`, `devices`, `compile`, `bench`, `kernels`, `figures`, `report`, `book`, `compressors`,
`experiments`.
"""

__version__ = "0.1.0"
