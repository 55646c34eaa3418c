import numpy as np
import pytest

from frontier.data.shards import HEADER_BYTES, MAGIC, read_shard, write_shard
from frontier.errors import UserError


def test_roundtrip(tmp_path):
    tokens = np.array([1, 5, 65535, 0, 42], dtype=np.uint16)
    write_shard(tmp_path / "s.bin", tokens)
    assert (tmp_path / "s.bin").stat().st_size == HEADER_BYTES + 2 * len(tokens)
    assert np.array_equal(read_shard(tmp_path / "s.bin"), tokens)
    header = np.fromfile(tmp_path / "s.bin", dtype="<i4", count=3)
    assert list(header) == [MAGIC, 1, 5]


def _corrupt(path, offset, value):
    raw = bytearray(path.read_bytes())
    raw[offset : offset + 4] = np.array([value], dtype="<i4").tobytes()
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize(
    "damage, words",
    [
        (lambda p: _corrupt(p, 0, 12345), "bad magic"),
        (lambda p: _corrupt(p, 4, 7), "unsupported version"),
        (lambda p: p.write_bytes(p.read_bytes()[:-2]), "promises"),
        (lambda p: p.write_bytes(p.read_bytes()[:100]), "truncated"),
        (lambda p: p.unlink(), "missing"),
    ],
)
def test_bad_shards_are_one_clear_error(tmp_path, damage, words):
    path = tmp_path / "train_000000.bin"
    write_shard(path, np.arange(100, dtype=np.uint16))
    damage(path)
    with pytest.raises(UserError) as e:
        read_shard(path)
    assert words in str(e.value) and "train_000000.bin" in str(e.value)
    assert "\n" not in str(e.value)
