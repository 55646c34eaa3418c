"""What classical compressors reach on the same held-out splits (validation, and test where the data has one), in
the same unit (bits per byte).

A compressor gets the training text as context: its score is
    bpb = 8 * (len(compress(train + val)) - len(compress(train))) / len(val)
where val is the concatenated UTF-8 text of the validation documents (exactly `val_bytes` bytes) and train the
training text (the last `context_bytes` of it, for large datasets). The texts are decoded from the shards, which
the lossless tokenizer makes exact.

- xz (LZMA2, preset 9 extreme, a dictionary larger than the context)
- PPMd variant H, the context model of 7z (through `pyppmd`, or the `7z` command where installed), at 7z's default
  order 6 and at order 16, with `PPMD_MEM` bytes of model memory: PPMd restarts its model when its memory fills, and
  then no longer conditions on all of the text before the scored part (at 256 MiB it fills on the docstrings
  corpus's 17.7 MB of training text and scores 1.4242 on test instead of 1.2913: docs/log.md)
- bzip2 and gzip for scale (gzip's 32 KB window sees almost none of the context)
"""

from __future__ import annotations

import bz2
import lzma
import shutil
import subprocess
import tempfile
import zlib
from pathlib import Path

import numpy as np

from ..data.dataset import Dataset

DEFAULT_CONTEXT_BYTES = 64 << 20
# PPMd's model memory: enough to hold the model of the whole training text (at 256 MiB it fills on the docstrings
# corpus and restarts: docs/log.md); each row records it.
PPMD_MEM = 2 << 30


def split_text(dataset: Dataset, split: str) -> bytes:
    """The documents of a split ("train", "val" or "test"), decoded from its shards and concatenated (UTF-8)."""
    tok = dataset.tokenizer
    shards = dataset.train_tokens() if split == "train" else [dataset.heldout_tokens(split)]
    out = []
    for shard in shards:
        ids = np.asarray(shard)
        cuts = np.flatnonzero(ids == tok.bos_id)
        for a, b in zip(cuts, list(cuts[1:]) + [len(ids)]):
            out.append(tok.decode(ids[a + 1 : b].tolist()).encode("utf-8"))
    return b"".join(out)


def _xz(data: bytes) -> bytes:
    filters = [{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME, "dict_size": max(1 << 20, min(len(data) * 2, 1 << 30))}]
    return lzma.compress(data, format=lzma.FORMAT_XZ, filters=filters)


def _ppmd(order: int):
    def compress(data: bytes) -> bytes:
        import pyppmd

        return pyppmd.compress(data, max_order=order, mem_size=PPMD_MEM)

    return compress


def _ppmd_7z(order: int):
    def compress(data: bytes) -> bytes:
        with tempfile.TemporaryDirectory() as d:
            src, dst = Path(d) / "in.txt", Path(d) / "out.7z"
            src.write_bytes(data)
            subprocess.run([shutil.which("7z") or "7z", "a", "-bd", "-y", f"-m0=PPMd:o={order}:mem={PPMD_MEM >> 20}m", str(dst), str(src)],
                           check=True, capture_output=True)
            return dst.read_bytes()

    return compress


def available() -> dict:
    """name -> compress function, for the compressors this machine has."""
    comps = {"xz -9e": _xz}
    try:
        import pyppmd  # noqa: F401

        comps["PPMd o6 (7z default)"] = _ppmd(6)
        comps["PPMd o16"] = _ppmd(16)
    except ImportError:
        if shutil.which("7z"):
            comps["PPMd o6 (7z default)"] = _ppmd_7z(6)
            comps["PPMd o16"] = _ppmd_7z(16)
    comps["bzip2 -9"] = lambda d: bz2.compress(d, 9)
    comps["gzip -9"] = lambda d: zlib.compress(d, 9)
    return comps


def conditional_bpb(compress, context: bytes, target: bytes) -> float:
    return 8 * (len(compress(context + target)) - len(compress(context))) / len(target)


def compressor_bpb(dataset: Dataset, context_bytes: int = DEFAULT_CONTEXT_BYTES, splits=None) -> list[dict]:
    """One row per available compressor: its bits per byte on each held-out split in `splits` (default: val, and
    test where the data has one) given the train text (`SPLIT_bpb`: the competition's comparison), and on the split
    alone (`SPLIT_bpb_alone`: the compressor adapting as it reads, with no context)."""
    splits = splits or (("val", "test") if dataset.has_test else ("val",))
    train = split_text(dataset, "train")
    targets = {s: split_text(dataset, s) for s in splits}
    for s, text in targets.items():
        if len(text) != dataset.heldout_bytes(s):
            raise RuntimeError(f"decoded {s} text has {len(text)} bytes, the manifest says {dataset.heldout_bytes(s)}")
    context = train[-context_bytes:]
    rows = []
    for name, fn in available().items():
        alone = len(fn(context))  # compressed once, for every split
        row = {"compressor": name, "context_bytes": len(context)}
        if name.startswith("PPMd"):
            row["mem_size"] = PPMD_MEM
        for s, text in targets.items():
            row.update({f"{s}_bpb": 8 * (len(fn(context + text)) - alone) / len(text),
                        f"{s}_bpb_alone": 8 * len(fn(text)) / len(text), f"{s}_bytes": len(text)})
        rows.append(row)
    return rows


def run_compressor_bench(dataset: Dataset, profile: str, out: str | Path, command: list[str] | None = None,
                         log=print) -> dict:
    """`compressor_bpb` on `dataset`, kept as a bench record (kind "compressors") under `out`; returns it."""
    from .bench_records import bench_record, new_record_path

    path = new_record_path(out, "compressors", [profile])
    rows = compressor_bpb(dataset)
    for r in rows:
        log(f"{r['compressor']:<22} " + "  ".join(f"{k} {v:.4f}" for k, v in r.items() if k.endswith("_bpb")))
    arguments = {"profile": profile, "data": str(dataset.folder), "manifest_hash": dataset.manifest_hash,
                 "context_bytes": DEFAULT_CONTEXT_BYTES, "ppmd_mem_size": PPMD_MEM}
    return bench_record("compressors", arguments, command, f"{__name__}.run_compressor_bench",
                        {"profile": profile, "rows": rows}, path, cpu=True)
