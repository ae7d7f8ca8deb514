"""A built-in benchmark as one declaration: where its files are published (and their checksums), how its files
become records, the prompt template, the metric, the plan that carves the records into fixed seeded splits, and
what `masforge tasks` says of it. Each benchmark is one module of `masforge.evaluators.benchmarks` holding a
subclass of :class:`Benchmark` marked ``@benchmark``, which registers its task (and its family of parts, such as
``mgsm:<lang>``) by name."""

from __future__ import annotations

import importlib
import pkgutil
import random
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple, TypeVar

from masforge.errors import TaskError
from masforge.evaluators.datasets import DataDir, Download, Files
from masforge.evaluators.example import Example
from masforge.evaluators.registry import register_task
from masforge.evaluators.splits import SPLITS
from masforge.evaluators.task import Task


@dataclass(frozen=True)
class Record:
    """One raw item of a benchmark: template fields, gold target and metadata."""

    id: str
    fields: dict[str, Any]
    target: Any
    meta: dict[str, Any] = field(default_factory=dict)


Records = Mapping[str, Sequence[Record]]
"""What a loader returns: the records of each source split of the benchmark (e.g. its official train and test)."""

Count = int | float | None  # examples (int), a fraction of the source (float) or the rest (None)


class Cut(NamedTuple):
    """One step of a split plan: `count` records of the source split `source` go to the task split `split`."""

    split: str
    source: str
    count: Count


Plan = tuple[Cut, ...]


@dataclass(frozen=True)
class Family:
    """The tasks made of one part of a benchmark each (``mgsm:de``, ``mmlu:anatomy``), registered together as
    ``<benchmark>:<placeholder>``; the loader gets the part's name (None: the whole benchmark)."""

    placeholder: str
    """The name of a part in the registered name: ``lang`` registers ``mgsm:<lang>``."""
    kind: str
    """What the parts are called where an unknown one is refused ("MGSM languages")."""
    description: str
    """The family's line in `masforge tasks`."""
    describe: str
    """One part's task description; ``{part}`` is filled with the part's name."""
    sizes: str
    """One part's split sizes for seed 0, train / validation / test, as `masforge tasks` shows them."""
    plan: Plan


def carve(task_name: str, seed: int, sources: Records, plan: Plan, group: str | None = None) -> dict[str, list[Record]]:
    """Shuffle each source once with Random(f"{task_name}:{seed}") and cut it as `plan` says, step by step in
    order. With `group`, records sharing `meta[group]` move together. A fixed count takes at most an equal share of
    its source, so a small copy of a benchmark (a test fixture, a sample) still fills every split; the published
    sets are far larger than their plans."""
    out: dict[str, list[Record]] = {s: [] for s in SPLITS}
    steps: dict[str, list[tuple[str, Count]]] = {}
    for split, source, count in plan:
        steps.setdefault(source, []).append((split, count))
    for source, cuts in steps.items():
        records = sources.get(source, [])
        units: list[list[Record]]
        if group is None:
            units = [[r] for r in records]
        else:
            by_key: dict[Any, list[Record]] = {}
            for r in records:
                by_key.setdefault(r.meta[group], []).append(r)
            units = list(by_key.values())
        random.Random(f"{task_name}:{seed}").shuffle(units)
        pos = 0
        for split, count in cuts:
            left = len(units) - pos
            if count is None:
                k = left
            elif isinstance(count, float):
                k = int(len(units) * count)
            else:
                k = min(count, len(units) // len(cuts))
            k = max(0, min(k, left))
            out[split].extend(r for unit in units[pos : pos + k] for r in unit)
            pos += k
    return out


class Benchmark(ABC):
    """One built-in benchmark. A subclass declares the class attributes below and :meth:`load`; it may fill its
    template from more than the record's fields (:meth:`prompt_fields`) and have parts (`family`, :meth:`parts`)."""

    name: ClassVar[str]
    """The registered task name."""
    description: ClassVar[str]
    sizes: ClassVar[str]
    """The split sizes for seed 0 on the published set, train / validation / test, as `masforge tasks` shows them."""
    metric: ClassVar[str]
    """A name in `masforge.evaluators.metrics.METRICS`."""
    template: ClassVar[str]
    """The prompt: a `str.format` template over the record's fields (see :meth:`prompt_fields`)."""
    plan: ClassVar[Plan]
    download: ClassVar[Download | None] = None
    """Where the files are published (None: they come with an installed package)."""
    group: ClassVar[str | None] = None
    """A `Record.meta` key whose records stay in one split (ARC's test inputs of one puzzle)."""
    family: ClassVar[Family | None] = None
    options: ClassVar[Mapping[str, Any]] = {}
    """The task's options and their defaults, passed to :meth:`load` as keywords. A task built with an option
    other than its default is named for it (``arc@kaggle``), so its results are never mixed with the default's."""

    @abstractmethod
    def load(self, files: Files, *part: str | None, **options: Any) -> Records:
        """The records of each source split, from `files`; a family's loader also gets the part's name (None: the
        whole benchmark)."""

    def prompt_fields(self, fields: Mapping[str, Any]) -> Mapping[str, Any]:
        """What the template is filled with: the record's fields, unless a benchmark writes some out first."""
        return fields

    def parts(self, files: Files) -> Sequence[str]:
        """The names of a family's parts (the MGSM languages, the MMLU subjects present)."""
        raise NotImplementedError(f"{self.name} has no parts")

    # ----------------------------------------------------------------------------------------

    def _part(self, files: Files, part: str | None) -> tuple[str | None, ...]:
        """The part arguments of :meth:`load` (none without a family); an unknown part is one TaskError."""
        if self.family is None:
            return ()
        if part is not None:
            known = self.parts(files)
            if part not in known:
                raise TaskError(f"unknown task '{self.name}:{part}'; {self.family.kind}: {', '.join(known)}")
        return (part,)

    def _settings(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """Every option with its value (the registry has refused unknown ones by name)."""
        return {**self.options, **options}

    def records(self, data_dir: DataDir = None, part: str | None = None, **options: Any) -> Records:
        """The loaded records of each source split (the whole benchmark, or one `part` of a family)."""
        files = Files(self.name, self.download, data_dir)
        return self.load(files, *self._part(files, part), **self._settings(options))

    def prompt(self, record: Record) -> str:
        """The question a system is asked about `record`."""
        return self.template.format(**self.prompt_fields(record.fields))

    def task(self, *, subset: str | None = None, data_dir: DataDir = None, seed: int = 0, **options: Any) -> Task:
        """The task (`subset`: one part of a family): the records carved by the plan, each asked as its prompt."""
        files = Files(self.name, self.download, data_dir)
        part = self._part(files, subset)
        settings = self._settings(options)
        name, description, plan = self.name, self.description, self.plan
        if subset is not None and self.family is not None:
            name, description = f"{self.name}:{subset}", self.family.describe.format(part=subset)
            plan = self.family.plan
        name += "".join(f"@{value}" for key, value in settings.items() if value != self.options[key])

        def build() -> dict[str, list[Example]]:
            carved = carve(name, seed, self.load(files, *part, **settings), plan, self.group)
            return {split: [Example(r.id, {"question": self.prompt(r)}, r.target, r.meta) for r in records]
                    for split, records in carved.items()}

        return Task(name, build, self.metric, description=description)


B = TypeVar("B", bound=type[Benchmark])


def benchmark(cls: B) -> B:
    """Class decorator: register the benchmark's task under ``cls.name`` (and its family as
    ``<name>:<placeholder>``), listed with its description and split sizes."""
    spec = cls()
    register_task(spec.name, spec.task, spec.description, spec.sizes, options=tuple(spec.options))
    if spec.family is not None:
        register_task(f"{spec.name}:<{spec.family.placeholder}>", spec.task, spec.family.description,
                      spec.family.sizes, options=tuple(spec.options))
    return cls


def import_all(package: str, path: Iterable[str], first: Sequence[str] = ()) -> list[str]:
    """Import every module of the package `package` (its folders `path`), which registers the benchmarks they
    declare: those named in `first` in that order, then the others alphabetically. Returns the modules' names."""
    found = sorted(module.name for module in pkgutil.iter_modules(list(path)))
    ordered = [name for name in first if name in found] + [name for name in found if name not in first]
    for name in ordered:
        importlib.import_module(f"{package}.{name}")
    return ordered
