import numpy as np
import pytest

from frontier.data.loader import TrainLoader
from frontier.errors import UserError

SHARD = np.arange(10_000)  # every window distinct


def test_same_seed_same_batches_and_every_window_once_per_epoch():
    a, b = TrainLoader([SHARD], 16, 4, seed=7), TrainLoader([SHARD], 16, 4, seed=7)
    starts = set()
    for _ in range(a.windows_per_epoch // 4):
        xa, ya = a.next_batch()
        xb, _ = b.next_batch()
        assert np.array_equal(xa, xb) and np.array_equal(ya[:, :-1], xa[:, 1:])
        starts |= {int(r[0]) for r in xa}
    assert a.epoch == 0 and len(starts) == a.windows_per_epoch


def test_folds_take_turns_and_never_mix():
    loader = TrainLoader([SHARD], 16, 4, seed=0, folds=2)
    window_of = {tuple(SHARD[o : o + 16]): i for i, o in enumerate(range(0, len(SHARD) - 16, 16))}
    for k in range(20):
        x, _ = loader.next_batch()
        assert loader.batch_fold == k % 2
        assert {window_of[tuple(r.tolist())] % 2 for r in x} == {loader.batch_fold}


def test_one_fold_keeps_the_plain_order_and_tiny_data_is_a_clear_error():
    plain = TrainLoader([SHARD], 16, 4, seed=3)
    one = TrainLoader([SHARD], 16, 4, seed=3, folds=1)
    assert np.array_equal(plain.next_batch()[0], one.next_batch()[0])
    with pytest.raises(UserError, match="fewer than one batch"):
        TrainLoader([SHARD[:100]], 16, 4, seed=0, folds=2)
