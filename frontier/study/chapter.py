"""A chapter's set-up in one call, and the few things every chapter does the same way.

    ch = setup(profile, run_root, figures_dir, data)   # the parameters cell's four values
    box = ch.box()                                     # the first screen: filled in by the last section
    rec = ch.run("baseline", seed=0)                   # a run trained, or reused where this code reproduces it
    ch.figure(fig, "01_loss")                          # saved as figures/01_loss_PROFILE.png; the cell shows it
    box.update("...")                                  # the chapter's finding, at most BOX_CHARS characters
    ch.records(recs)                                   # the collapsed Records cell: code, machine, data, log

`run_root` and `figures_dir` default (None) to the repository's `runs/` and `figures/`, wherever the notebook runs
from; `data` (None) is the profile's own corpus (`Profile.corpus`), or a prepared data folder (e.g. the
competition's web text for `trn2`), whose runs then live under `run_root/PROFILE/RECIPE/` as any run on given data.
A section of a chapter runs after this set-up alone: what it needs it computes, or reads from the run records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..data.dataset import Dataset, profile_dataset
from ..errors import UserError
from ..profiles import Profile, get_profile
from ..records import REPO, code_version, hardware
from . import experiments as ex
from . import report

BOX_CHARS = 600  # a chapter's first screen: the finding, its steps and seeds, the machine, the verdict
PLACEHOLDER = "*The finding is filled in when the chapter's last section has run.*"


def machine() -> str:
    """This machine in a few words: the CPU model and its cores."""
    hw = hardware(None)
    return f"{hw.get('cpu') or hw.get('machine')}, {hw.get('cpu_cores')} cores"


class Box:
    """The chapter's finding on its first screen: shown empty where the set-up runs, filled by `update` (an
    updatable display: the saved notebook keeps the filled box at the top)."""

    def __init__(self):
        from IPython import get_ipython
        from IPython.display import Markdown, display

        self.text = PLACEHOLDER
        # inside IPython an updatable display; outside (a script, a test), printed text
        self._handle = display(Markdown(self._quoted()), display_id=True) if get_ipython() else print(self._quoted())

    def _quoted(self) -> str:
        return "\n".join("> " + line if line else ">" for line in self.text.splitlines())

    def update(self, text: str) -> None:
        text = text.strip()
        if len(text) > BOX_CHARS:
            raise UserError(f"the finding box is {len(text)} characters, over {BOX_CHARS}",
                            "say the finding, its steps and seeds, the machine and the verdict in fewer words")
        self.text = text
        if self._handle is not None:
            from IPython.display import Markdown

            self._handle.update(Markdown(self._quoted()))
        else:
            print(self._quoted())


@dataclass
class Chapter:
    profile: Profile
    data: Dataset
    root: Path
    figures: Path
    given_data: bool  # a data folder was passed (not the profile's own corpus)
    log_lines: list[str] = field(default_factory=list)

    def log(self, line: str) -> None:
        self.log_lines.append(line)

    def box(self) -> Box:
        return Box()

    def run(self, recipe: str, seed: int = 0, **kw) -> dict:
        """`frontier.study.experiments.run` under this chapter's run root, profile and data: the run record
        (reused where this code reproduces it, trained otherwise)."""
        return ex.run(recipe, self.profile, seed=seed, root=self.root, data=self.data if self.given_data else None,
                      log=self.log, **kw)

    def seeds(self, recipe: str, n: int | None = None, **kw) -> list[dict]:
        """`run` for seeds 0..n-1 (default: the profile's seeds)."""
        return [self.run(recipe, seed=s, **kw) for s in range(n or self.profile.seeds)]

    def figure(self, fig, name: str):
        """Save `fig` as `figures/NAME_PROFILE.png` (`frontier.figures.save_figure`) and return it, so that a cell
        ending with this call shows the same pixels."""
        from ..figures import save_figure

        save_figure(fig, self.figures / f"{name}_{self.profile.name}.png")
        return fig

    def records(self, recs=(), benches=()) -> None:
        """The chapter's provenance: the code running it, the machine, the data, each run record quoted (the code
        that trained it and the code that reproduced it) and each bench record, and what the experiments said.
        Paths inside the repository are printed relative to it (`runs/...`), whichever checkout ran the chapter, and
        so are those under a run root named `runs` elsewhere."""
        out = [ex.code_banner(),
               f"machine: {machine()}; profile {self.profile.name}; data {self.data.folder} "
               f"(manifest {self.data.manifest_hash})"]
        recs = list(recs)
        if recs:
            out.append("runs:\n" + report.provenance(recs))
            out += [f"  {r.get('label') or r['recipe']} s{r['seed']}: {r.get('run_dir')}" for r in recs]
        out += [f"bench record {b.get('path')}: code {report.short_code(b.get('code'))}, {b.get('created')}"
                for b in benches]
        out += list(dict.fromkeys(self.log_lines))  # each line once: a run reused by several sections is said once
        text = "\n".join(out)
        if self.root.name == "runs":  # a run root elsewhere (`frontier book --out DIR`): its runs as `runs/...` too
            text = text.replace(f"{self.root}/", "runs/")
        print(text.replace(f"{REPO}/", ""))


def setup(profile: str = "cpu", run_root: str | Path | None = None, figures_dir: str | Path | None = None,
          data: str | Path | None = None) -> Chapter:
    """A chapter's set-up: the profile, its data (prepared on first use), where runs and figures go; prints the
    code version and the machine, the one line a reader needs to place the numbers that follow."""
    p = get_profile(profile)
    if data is not None and not Path(data).is_dir():
        raise UserError(f"data folder {str(data)!r} does not exist",
                        "pass a folder made by `frontier prepare --out DIR`, or data=None for the profile's corpus")
    lines: list[str] = []
    dataset = Dataset(data) if data is not None else profile_dataset(p, log=lines.append)
    if data is not None and p.fixed_vocab:
        dataset.check_vocab(p.vocab_size, f"the {p.name} profile")
    ch = Chapter(p, dataset, Path(run_root or REPO / "runs").resolve(), Path(figures_dir or REPO / "figures").resolve(),
                 given_data=data is not None, log_lines=lines)
    c = code_version()
    m = dataset.manifest
    print(f"code {report.short_code(c)} (source {c['source_sha256']}) on {machine()}; profile {p.name}; "
          f"data {Path(dataset.folder).name}: {m['train']['tokens']:,} training tokens")
    return ch
