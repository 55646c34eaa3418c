"""Token shards in the parameter-golf / modded-nanogpt format, validated on read.

A shard is a header of 256 little-endian int32 (`[0]` = 20240520, `[1]` = 1, `[2]` = number of tokens) followed
by the tokens as little-endian uint16. Documents are BOS + tokens, concatenated.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import UserError

MAGIC = 20240520
VERSION = 1
HEADER_INTS = 256
HEADER_BYTES = HEADER_INTS * 4


def write_shard(path: str | Path, tokens: np.ndarray) -> None:
    tokens = np.asarray(tokens)
    if tokens.size and (tokens.min() < 0 or tokens.max() >= 2**16):
        raise ValueError("shard tokens must fit in uint16")
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[0], header[1], header[2] = MAGIC, VERSION, tokens.size
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(header.tobytes())
        fh.write(tokens.astype("<u2").tobytes())
    tmp.replace(path)


def read_shard(path: str | Path) -> np.ndarray:
    """The tokens of a shard as a read-only memory map; one clear error if the file is not a valid shard."""
    path = Path(path)
    fix = "re-create the data folder with `frontier prepare`"
    if not path.is_file():
        raise UserError(f"shard {str(path)!r} is missing", fix)
    size = path.stat().st_size
    if size < HEADER_BYTES:
        raise UserError(f"shard {str(path)!r} is truncated ({size} bytes, shorter than its header)", fix)
    header = np.fromfile(path, dtype="<i4", count=HEADER_INTS)
    if header[0] != MAGIC:
        raise UserError(f"shard {str(path)!r} has a bad magic number {header[0]} (expected {MAGIC})", fix)
    if header[1] != VERSION:
        raise UserError(f"shard {str(path)!r} has unsupported version {header[1]} (expected {VERSION})", fix)
    n = int(header[2])
    if size != HEADER_BYTES + 2 * n:
        raise UserError(
            f"shard {str(path)!r} has {size} bytes but its header promises {n} tokens ({HEADER_BYTES + 2 * n} bytes)",
            fix,
        )
    return np.memmap(path, dtype="<u2", mode="r", offset=HEADER_BYTES, shape=(n,))


class ShardWriter:
    """Appends documents to numbered shards of at most `shard_tokens` tokens (documents may span shards)."""

    def __init__(self, folder: Path, split: str, shard_tokens: int = 1 << 25):
        self.folder, self.split, self.shard_tokens = Path(folder), split, shard_tokens
        self.buffer = np.empty(shard_tokens, dtype=np.uint16)
        self.filled = 0
        self.paths: list[Path] = []
        self.tokens = 0

    def add(self, ids: list[int]) -> None:
        arr = np.asarray(ids, dtype=np.uint16)
        while arr.size:
            take = min(arr.size, self.shard_tokens - self.filled)
            self.buffer[self.filled : self.filled + take] = arr[:take]
            self.filled += take
            self.tokens += take
            arr = arr[take:]
            if self.filled == self.shard_tokens:
                self.flush()

    def flush(self) -> None:
        if self.filled == 0:
            return
        path = self.folder / f"{self.split}_{len(self.paths):06d}.bin"
        write_shard(path, self.buffer[: self.filled])
        self.paths.append(path)
        self.filled = 0
