"""Data parallelism with torch.distributed: N processes (ranks) train one model on one global batch.

Launch (one machine). `frontier train ... --nproc N` starts torchrun itself (`torch.distributed.run --standalone
--nproc-per-node N -m frontier train ...`, `launch`) and waits for it; `torchrun --nproc-per-node N -m frontier
train ...` works the same. Every rank runs that command, and torchrun's RANK / WORLD_SIZE / LOCAL_RANK say which
rank it is: `init` builds the process group from them. One process (no torchrun, or a world of 1) builds no
process group and runs exactly the code it ran before this module existed.

The backend is the device's: `gloo` on the CPU, `nccl` on CUDA, on Trainium what the installed torch-neuronx
registers with torch.distributed (`neuron` for native TorchNeuron, `xla` for the XLA path), judged by the backends
torch.distributed then offers, never by an import succeeding; anything else is refused with one line. The group's
timeout (`TIMEOUT_S`, `--dist-timeout`) bounds every collective, so a rank that hangs ends the job with an error
instead of holding the others forever. Bookkeeping (the loss, signals, rank 0's clock, agreement on errors) goes
through a CPU group (gloo) beside it.

The world size does not change what is trained, so it is not in the config (nor its hash); the record keeps it
beside the config (`world_size`, `distributed`). The profile's `batch_size` stays the GLOBAL batch: every rank
draws the batch one process would draw (same seed, same order) and takes rows [r b, (r + 1) b) of it, b =
batch_size / N (a batch N does not divide is refused). In each step:

- Gradients: DistributedDataParallel averages them with a bucketed all-reduce, each bucket sent as soon as backward
  has filled it, while backward goes on (under torch.compile its DDPOptimizer cuts the graph at the buckets). A
  rank's loss is the mean over its b rows, and every rank has b rows, so the average over ranks is the gradient of
  the mean over the whole batch: only the order of the sums differs from one process.
- Muon: every rank keeps every momentum buffer (they follow the averaged gradients: the same everywhere) but
  orthogonalises only its share of each batch of same-shape matrices; an all-gather assembles the updates
  (`map_shards`), so a rank does 1/N of the Newton-Schulz work.
- The sparse bigram update stays sparse: the row ids and gradient rows of the batch's positions are all-gathered
  (batch x sequence rows of the table's width, a fixed shape; untouched rows never travel), then every rank sums
  them by row and runs the same Adam on the same rows (`exchange_rows`). The dense reference update
  (`bigram-dense`) is an ordinary parameter, its whole gradient all-reduced by DDP.
- The n-gram tables are the same on every rank: counting the shards, every rank counts all of them; counting the
  batches as they stream past, the batch's tokens are all-gathered first, so every rank counts the whole batch.
- The EMA of the weights follows the parameters, which are the same on every rank: nothing travels.

The clock is rank 0's. Inside the timed step, one all-reduce carries each rank's loss (averaged for the curve) and
whether it got SIGINT/SIGTERM; after it, rank 0's step seconds are broadcast and every rank charges them to its
own clock. So the clocks, the learning-rate schedule (which reads the clock) and the decision to stop are the same
everywhere, and every rank stops at the same step. Rank 0 alone writes the record and checkpoints; the others
wait at a barrier until it has saved (or exit after training, while rank 0 evaluates).

Threads: the ranks share the machine's cores, so each uses cores / ranks-on-this-machine threads
(`torch.set_num_threads`; on 2 cores, 2 ranks of 1 thread each), recorded as `threads_per_rank`.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import signal
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import torch

from ..errors import UserError

TIMEOUT_S = 120.0  # the process group's timeout: how long a collective waits for a rank that does not come
SHUTDOWN_S = 300  # how long `launch` lets the ranks finish a step and save after a signal, before SIGKILL


def launched() -> bool:
    """Whether this process is one rank of a torchrun job of more than one process."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def env_rank() -> int:
    """torchrun's RANK of this process (0 without torchrun): rank 0 speaks for the job."""
    return int(os.environ.get("RANK", "0"))


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def everywhere(e: UserError) -> UserError:
    """Mark an error that every rank raises alike: only rank 0 prints it (`frontier.cli.main`)."""
    e.everywhere = True
    return e


def check_batch(batch_size: int, world_size: int) -> int:
    """This rank's rows of every batch, batch_size / world_size; one line when world_size does not divide it."""
    if batch_size % world_size:
        fits = [n for n in range(1, batch_size + 1) if batch_size % n == 0]
        raise everywhere(UserError(f"the batch of {batch_size} rows cannot be split over {world_size} processes",
                                   f"use a process count that divides it ({', '.join(map(str, fits))})"))
    return batch_size // world_size


@dataclass(eq=False)  # one per process, compared by identity
class Dist:
    """Where this process stands in the job, and the collectives the trainer uses. With one process (the default)
    every method is a no-op that returns what one process would have."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    backend: str | None = None  # gloo | nccl | neuron | xla; None with one process
    timeout_s: float | None = None
    threads: int | None = None  # torch threads of each rank
    device: torch.device = torch.device("cpu")  # where the main group's tensors live
    cpu_group: object = None  # the gloo group for bookkeeping

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def rank_batch(self, batch_size: int) -> int:
        return check_batch(batch_size, self.world_size)

    def describe(self, batch_size: int) -> dict | None:
        """How the job ran, for the run record (None with one process)."""
        if not self.enabled:
            return None
        return {"world_size": self.world_size, "backend": self.backend, "local_world_size": self.local_world_size,
                "rank_batch_size": self.rank_batch(batch_size), "threads_per_rank": self.threads,
                "timeout_s": self.timeout_s,
                "gradients": "DistributedDataParallel (bucketed all-reduce, mean, overlapped with backward)",
                "muon": "Newton-Schulz of each rank's share of the matrices, all-gathered",
                "bigram": "row ids and gradient rows of the batch's positions all-gathered",
                "clock": "rank 0's step seconds, broadcast"}

    # ------------------------------------------------------------------ bookkeeping (CPU group)
    def step_sync(self, loss: torch.Tensor, signal_name: str | None) -> tuple[float, str | None]:
        """The end of a step, on every rank: (the loss averaged over ranks, the signal any rank got)."""
        if not self.enabled:
            return float(loss.detach()), signal_name
        import torch.distributed as dist

        vec = torch.tensor([float(loss.detach()), signal_name == "SIGINT", signal_name == "SIGTERM"],
                           dtype=torch.float64)
        dist.all_reduce(vec, group=self.cpu_group)
        total, sigint, sigterm = vec.tolist()
        return total / self.world_size, "SIGINT" if sigint else "SIGTERM" if sigterm else None

    def from_main(self, value: float) -> float:
        """Rank 0's `value` on every rank (the job's clock is rank 0's)."""
        if not self.enabled:
            return value
        import torch.distributed as dist

        t = torch.tensor([value], dtype=torch.float64)
        dist.broadcast(t, src=0, group=self.cpu_group)
        return float(t[0])

    def share(self, obj):
        """Rank 0's `obj` (picklable) on every rank (e.g. a run folder named by rank 0's clock)."""
        if not self.enabled:
            return obj
        import torch.distributed as dist

        box = [obj]
        dist.broadcast_object_list(box, src=0, group=self.cpu_group)
        return box[0]

    def barrier(self) -> None:
        if self.enabled:
            import torch.distributed as dist

            dist.barrier(group=self.cpu_group)

    def agree(self, fn):
        """Run `fn` on rank 0 only; its UserError is raised on every rank (and nothing runs past this point on
        any rank before rank 0 has run it). One process: fn()."""
        if not self.enabled:
            return fn()
        return self._main_then(fn, others=False)

    def main_first(self, fn):
        """Run `fn` on rank 0, then on the others (e.g. rank 0 prepares the data the others then open); rank 0's
        UserError is raised on every rank."""
        if not self.enabled:
            return fn()
        return self._main_then(fn, others=True)

    def _main_then(self, fn, others: bool):
        import torch.distributed as dist

        result, box = None, [None]
        if self.is_main:
            try:
                result = fn()
            except UserError as e:
                box = [(e.problem, e.fix)]
        dist.broadcast_object_list(box, src=0, group=self.cpu_group)
        if box[0] is not None:
            raise everywhere(UserError(*box[0]))
        if others and not self.is_main:
            result = fn()
        return result

    # ------------------------------------------------------------------ the model's collectives (main group)
    def all_gather_rows(self, t: torch.Tensor) -> torch.Tensor:
        """Every rank's `t` stacked along the first dimension, in rank order (one process: `t`)."""
        if not self.enabled:
            return t
        import torch.distributed as dist

        t = t.contiguous()
        out = t.new_empty((self.world_size * t.shape[0], *t.shape[1:]))
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor  # the newer name first
        gather(out, t)
        return out

    def map_shards(self, fn, batch: torch.Tensor) -> torch.Tensor:
        """fn(batch), a map over the first dimension, with each rank computing 1/N of it: zero rows pad the batch
        to a multiple of N, rank r maps its slice, an all-gather assembles the results (Muon's Newton-Schulz: a
        zero matrix maps to zero)."""
        if not self.enabled:
            return fn(batch)
        k, n = batch.shape[0], self.world_size
        per = -(-k // n)
        if per * n > k:
            batch = torch.cat([batch, batch.new_zeros((per * n - k, *batch.shape[1:]))])
        return self.all_gather_rows(fn(batch[self.rank * per : (self.rank + 1) * per]))[:k]

    def exchange_rows(self, rows: torch.Tensor, grads: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The sparse bigram update's (row id, gradient row) per position of the whole batch, from this rank's:
        all-gathered in rank order (one process's order of positions), the gradients divided by N (a rank's loss
        is the mean over its own rows, 1/N of the batch)."""
        return self.all_gather_rows(rows), self.all_gather_rows(grads) / self.world_size

    def wrap(self, model: torch.nn.Module, ignore: list[str]) -> torch.nn.Module:
        """`model` under DistributedDataParallel (one process: `model` itself). `ignore`: parameters whose
        gradients DDP must leave alone (the sparse bigram table and its sink: `exchange_rows` handles them).
        Buffers (the n-gram tables, the rotary tables) are never synchronised: every rank computes the same."""
        if not self.enabled:
            return model
        from torch.nn.parallel import DistributedDataParallel as DDP

        DDP._set_params_and_buffers_to_ignore_for_model(model, list(ignore) + [n for n, _ in model.named_buffers()])
        return DDP(model, device_ids=[self.device.index] if self.device.type == "cuda" else None)


ONE = Dist()  # one process
_CURRENT: tuple[Dist, object] | None = None  # this process's (Dist, DeviceInfo) once `init` built a group


def backend_for(device) -> str:
    """The torch.distributed backend for a `frontier.devices.DeviceInfo`, or one line saying why there is none."""
    import torch.distributed as dist

    if not dist.is_available():
        raise UserError("this torch was built without torch.distributed", "train on one process (--nproc 1)")
    if device.backend == "cpu":
        return "gloo"
    if device.backend == "cuda":
        if dist.is_nccl_available():
            return "nccl"
        raise UserError("this torch has no NCCL for data parallelism on CUDA",
                        "install a CUDA build of torch with NCCL, or train on one process (--nproc 1)")
    if device.backend == "neuron-native":  # torch_neuronx (imported by the device probe) registers "neuron"
        name = "neuron"
    elif device.backend == "neuron-xla":
        name = "xla"
        try:  # the XLA path registers its backend when this module is imported
            importlib.import_module("torch_xla.distributed.xla_backend")
        except Exception:  # noqa: BLE001 -- judged below by what torch.distributed offers
            pass
    else:
        raise UserError(f"no torch.distributed backend for device backend {device.backend!r}",
                        "train on one process (--nproc 1)")
    if dist.is_backend_available(name):
        return name
    versions = ", ".join(f"{k} {v}" for k, v in device.versions.items())
    raise UserError(f"the installed Neuron packages ({versions}) offer no {name!r} torch.distributed backend for "
                    f"{device.backend}", "install torch-neuronx from the Neuron pip index (see the README's "
                    "Trainium section), or train on one process (--nproc 1)")


def init(device, timeout_s: float | None = None):
    """(Dist, DeviceInfo) of this process. Under torchrun (WORLD_SIZE > 1): the process group, built once per
    process from torchrun's environment, its backend from the device (`backend_for`), its timeout `timeout_s`
    (default `TIMEOUT_S`), and the device this rank uses (CUDA: cuda:LOCAL_RANK); the rank's threads set to its
    share of the cores. Otherwise (ONE, device)."""
    global _CURRENT
    if not launched():
        return ONE, device
    if _CURRENT is not None:
        return _CURRENT
    import torch.distributed as dist

    world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    try:
        backend = backend_for(device)
    except UserError as e:
        raise everywhere(e) from None
    extra = {}
    if device.backend == "cuda":
        if local_world > torch.cuda.device_count():
            raise everywhere(UserError(f"{local_world} processes on this machine but torch sees "
                                       f"{torch.cuda.device_count()} CUDA GPU(s)", "start one process per GPU"))
        torch.cuda.set_device(local_rank)
        device = dataclasses.replace(device, device=torch.device("cuda", local_rank))
        extra["device_id"] = device.device
    timeout = timedelta(seconds=timeout_s or TIMEOUT_S)
    dist.init_process_group(backend, timeout=timeout, **extra)
    cpu_group = dist.group.WORLD if backend == "gloo" else dist.new_group(backend="gloo", timeout=timeout)
    # The ranks on this machine share its cores: each takes its share (on 2 cores, 2 ranks of 1 thread each).
    threads = max(1, usable_cores() // local_world)
    torch.set_num_threads(threads)
    ctx = Dist(rank, world, local_rank, local_world, backend, timeout.total_seconds(), threads, device.device,
               cpu_group)
    _CURRENT = (ctx, device)
    return _CURRENT


CLOSING_S = 3600.0  # how long a rank that finished waits at the closing barrier for rank 0's evaluation and record


def close(wait: bool = False) -> None:
    """Tear down this process's process group (if `init` built one). `wait` (a command that ended cleanly on every
    rank): first every rank meets at a barrier on the CPU group, so no rank tears its connections down while rank 0
    still evaluates and writes the record (a rank that left early was seen to abort in the transport's teardown,
    "terminate called without an active exception"); the barrier waits up to `CLOSING_S`."""
    global _CURRENT
    if _CURRENT is not None:
        import torch.distributed as dist

        if dist.is_initialized():
            if wait:
                ctx = _CURRENT[0]
                dist.monitored_barrier(group=ctx.cpu_group, timeout=timedelta(seconds=CLOSING_S))
            dist.destroy_process_group()
        _CURRENT = None


def collective_failure(e: BaseException) -> bool:
    """Whether `e` came out of a torch.distributed collective (a peer that died or timed out), not the model."""
    import torch.distributed as dist

    if isinstance(e, getattr(dist, "DistError", ())):
        return True
    text = str(e).lower()  # DDP's reducer fails inside backward, from C++: known by its message
    if any(w in text for w in ("gloo", "nccl", "processgroup", "c10d", "connection reset", "connection closed")):
        return True
    tb, where = e.__traceback__, os.path.join("torch", "distributed", "")
    while tb is not None:
        if where in tb.tb_frame.f_code.co_filename and "elastic" not in tb.tb_frame.f_code.co_filename:
            return True
        tb = tb.tb_next
    return False


def explain_failure(e: BaseException) -> str:
    """One line for a rank whose collective failed."""
    first = (str(e).strip().splitlines() or [""])[0][:300]
    return (f"rank {env_rank()}: a collective failed ({type(e).__name__}: {first}), most likely because another "
            "rank of the job ended or stopped answering; look for that rank's error (the launcher names it)")


# ----------------------------------------------------------------------------- the launcher

EXIT_BY_STATUS = {"interrupted": 130, "diverged": 3}


def _record_stamp(run_dir: Path | None):
    path = None if run_dir is None else Path(run_dir) / "result.json"
    if path is None or not path.is_file():
        return None
    st = path.stat()
    return st.st_mtime_ns, st.st_size


def _status_since(run_dir: Path | None, before) -> str | None:
    """The status in `run_dir`'s record if the job wrote it (None if it wrote none)."""
    stamp = _record_stamp(run_dir)
    if stamp is None or stamp == before:
        return None
    import json

    try:
        return json.loads((Path(run_dir) / "result.json").read_text()).get("status")
    except (OSError, ValueError):
        return None


def torchrun_args(nproc: int, argv: list[str]) -> list[str]:
    """torchrun's arguments for `python -m frontier <argv>` on `nproc` ranks of this machine."""
    return ["--standalone", f"--nproc-per-node={nproc}", f"--shutdown-timeout={SHUTDOWN_S}", "--module", "--", "frontier",
            *argv]


def launch(argv: list[str], nproc: int, run_dir: str | Path | None = None, log=print) -> int:
    """Run `python -m frontier <argv>` on `nproc` ranks under torchrun (`torch.distributed.run`, standalone: a
    free port on this machine) and wait. Ctrl-C or SIGTERM here reaches every rank once (torchrun forwards it):
    they finish the step, rank 0 saves, and this returns 130. The exit status is the job's: 0, rank 0's status
    for a run that stopped (`interrupted` 130, `diverged` 3), a rank's own (2 for bad input: it said why), else 1
    with one line naming the rank that ended first and how."""
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    before = _record_stamp(run_dir)
    args = torchrun.get_args_parser().parse_args(torchrun_args(nproc, argv))
    # what torchrun would set with a warning; each rank sets its torch threads again (`init`)
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, usable_cores() // nproc)))
    log(f"launching {nproc} processes: python -m torch.distributed.run {' '.join(torchrun_args(nproc, argv))}")
    try:
        torchrun.run(args)
        return 0
    except SignalException as e:
        status = _status_since(run_dir, before)
        if status != "interrupted":
            print(f"error: {signal.Signals(e.sigval).name} stopped the job before rank 0 saved a checkpoint; "
                  "start the run again", file=sys.stderr)
        return 130
    except ChildFailedError as e:
        rank, failure = e.get_first_failure()
        status = _status_since(run_dir, before)
        if status in EXIT_BY_STATUS:
            return EXIT_BY_STATUS[status]
        if failure.exitcode in (2, 4) and status in (None, "failed"):
            return failure.exitcode  # bad input, or --strict: the rank printed its own one-line error
        how = (f"was killed by {failure.signal_name()}" if failure.exitcode < 0
               else f"exited with status {failure.exitcode}")
        where = f"; the run record in {run_dir} says {status!r}" if status else ""
        print(f"error: rank {rank} of {nproc} {how}, so torchrun stopped the other ranks{where}; see that rank's "
              "messages above, fix the cause and start the run again", file=sys.stderr)
        return 1
