"""Tune a genome's knobs with optuna: the structure stays, the numbers and choices move.

The search space is read off one base genome (the best candidate, or ``genome_id``): per agent its
temperature (a few values plus "LM default"), copies, dspy module kind and prompt adapter; the rounds of a cyclic
topology; and the aggregation (judge only if the base has one: removing it drops the judge agent).
Each optuna trial builds a genome from those choices and submits it through ``ctx.submit``:

* single objective (default): TPE on the task fitness (quality minus weighted cost);
* ``multi_objective=True``: NSGA-II on (quality up, dollars per example down), so the study's Pareto
  front is the quality/cost trade-off of this design.

Nothing is paid twice: a trial whose knobs equal an earlier completed trial's (also from a resumed
study) or whose genome the search already knows is told the stored value at once, and choices that do
not change behaviour (majority vote over a single answer) are canonicalised to the same genome. Nor is a trial
paid for that is expected to cost more than ``max_trial_share`` of the search's LM-call budget (its selection
examples missing from the answer cache, times its calls per example): it is told PRUNED, so TPE learns to leave
that corner alone.

The study lives in an optuna storage: ``storage`` if given (an optuna storage URL: ``sqlite:///FILE`` on one
machine, ``postgresql://USER:PASSWORD@HOST/DB`` for several machines; a plain path means an SQLite file), else
``<run folder>/optuna.sqlite3`` (:data:`STUDY_FILE`) when the search has a run folder, else memory. A stored study
is opened with ``load_if_exists=True``: a strategy run again on the same storage continues it (its trials inform
the sampler, and the base genome is read back from the study so the space is the same).

A resumed *run* (``masforge search --resume``) does not continue the run folder's study: the resume replays the run
from its start against the archive and the LM cache, so the engine deletes that study first and the replay
rebuilds it trial by trial, to the same candidates and scores as a run never stopped (a study continued instead
would seed the sampler with its trial count and take another path). A study in a storage you named is shared and
left as it stands, so the replay of such a run can take another path; the resume reports where it diverged.

Several processes may work one study at the same time (give them the same storage URL and study name): each
marks its trials with its owner (host and process) and beats a heartbeat for the trials it evaluates; trials
other processes completed inform every sampler and are told for free when asked again; a trial whose knobs
another live process is already evaluating is skipped; and a trial whose process died (its process gone on this
host, or its heartbeat stale for ``3 * heartbeat_s``) is failed and enqueued again, so a surviving or resumed
process evaluates it. The sampler is re-seeded before every ask from ``ctx.seed`` and the number the trial will
get, so a single process is reproducible and processes sharing a study do not replay each other's points.

Options: ``genome_id``, ``trials`` (per run; None: until the search stops), ``multi_objective``,
``storage``, ``study_name``, ``heartbeat_s``, ``knobs``, ``modules``, ``temperatures``, ``max_copies``,
``max_rounds``, ``startup_trials``, ``population_size``, ``max_trial_share``, ``surrogate`` / ``surrogate_margin``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from masforge.errors import BudgetExceeded, ConfigError
from masforge.genome.graph import answers_at_output, cyclic_agents, lm_calls_per_example
from masforge.genome.names import EXECUTE_MODULE as EXECUTE
from masforge.genome.schema import MODULE_KINDS, PICKING_AGGREGATIONS, Genome
from masforge.genome.validate import problems
from masforge.lm.adapters import ADAPTERS
from masforge.search.context import Proposal, SearchContext
from masforge.search.events import Note
from masforge.search.operators.structural import TEMPERATURES
from masforge.search.population import Candidate
from masforge.search.strategies.base import Strategy, bad_option, register

STUDY_FILE = "optuna.sqlite3"
"""The study's file in the run folder when no storage is given."""

KNOBS = ("temperature", "copies", "rounds", "module", "aggregation", "adapter")


def storage_url(storage: str) -> str:
    """An optuna RDB URL for a path (an SQLite file, parent directories created) or a URL as given (a bare
    ``postgresql://`` gets the PostgreSQL driver that is installed)."""
    if "://" in storage:
        scheme, rest = storage.split("://", 1)
        if scheme in ("postgresql", "postgres"):
            import importlib.util

            if importlib.util.find_spec("psycopg") is not None:
                return f"postgresql+psycopg://{rest}"
            if importlib.util.find_spec("psycopg2") is None:
                raise ConfigError("a postgresql:// tune storage needs a PostgreSQL driver: "
                                  "pip install 'masforge[postgres]'")
            return f"postgresql://{rest}"
        return storage
    path = Path(storage).expanduser().resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Heartbeats, fail_stale_trials and TPE's constant_liar are marked experimental by optuna, and optuna hints
    that heartbeats are meant for optimize(): tune uses them deliberately, and a note per ask would drown the
    run log."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*(experimental|Heartbeat of storage)")
        yield


def _process_start(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot), or None if it does not exist: with the pid it
    names one process, even after the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _me() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid(), "start": _process_start(os.getpid())}


def _owner_dead(owner: Any, started: datetime | None) -> bool:
    """True if ``owner`` (a trial's ``masforge_owner``) is a process of this host that no longer runs. Owners on
    other hosts are judged by their heartbeat instead."""
    if not isinstance(owner, dict):
        # Marked within milliseconds of being asked: an old unmarked trial was left by a process that died (or
        # by a masforge that did not mark owners); a fresh one is being marked right now.
        return started is None or (datetime.now() - started).total_seconds() > 60
    if owner.get("host") != socket.gethostname():
        return False
    start = _process_start(int(owner.get("pid", -1)))
    return start is None or (owner.get("start") is not None and start != owner.get("start"))


def _requeue(study: Any, params: dict[str, Any]) -> None:
    """Enqueue ``params`` again unless already waiting (optuna's ``skip_if_exists`` would also skip
    because of the failed trial itself)."""
    from optuna.trial import TrialState

    if not params:
        return
    for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
        if t.system_attrs.get("fixed_params", t.params) == params:
            return
    study.enqueue_trial(params)


@register
class Tune(Strategy):
    """Optuna over one genome's knobs (TPE on fitness, or NSGA-II on quality vs cost)."""

    name = "tune"
    max_idle_steps = 3

    def __init__(self, genome_id: str | None = None, trials: int | None = None, multi_objective: bool = False,
                 storage: str | None = None, study_name: str | None = None, heartbeat_s: int = 10,
                 knobs: list[str] | tuple[str, ...] = KNOBS, modules: list[str] | tuple[str, ...] | None = None,
                 temperatures: list[float] | tuple[float, ...] = TEMPERATURES, max_copies: int = 5,
                 max_rounds: int = 3, startup_trials: int = 5, population_size: int = 8, max_asks: int = 25,
                 max_trial_share: float | None = 0.5, **options: Any) -> None:
        """Options of tune.

        Args:
            genome_id: the genome whose knobs are tuned (None: the best candidate so far).
            trials: trials this run asks for (None: until the search stops).
            multi_objective: NSGA-II on quality and dollars per example instead of TPE on the fitness.
            storage: optuna storage URL of the study (sqlite:///FILE or postgresql://...; --tune-storage).
            study_name: the study's name (--tune-study); searches given the same storage and name share it.
            heartbeat_s: seconds between heartbeats of a running trial (a trial silent for 3 x this is taken over).
            knobs: what is tuned: temperature, copies, rounds, module, aggregation, adapter.
            modules: the dspy module kinds the module knob may choose (None: all but react).
            temperatures: the temperatures the temperature knob may choose.
            max_copies: most copies of an agent the copies knob may choose.
            max_rounds: most rounds of a cyclic topology the rounds knob may choose.
            startup_trials: random trials before TPE starts modelling the space.
            population_size: NSGA-II's population (multi_objective).
            max_asks: trials asked per step while looking for one not evaluated yet.
            max_trial_share: the most of the search's LM-call budget one trial may be expected to cost (its
                selection examples missing from the answer cache, times the calls it makes per example); a costlier
                trial is told PRUNED without being paid for. None: no limit.
        """
        super().__init__(**options)
        unknown = [k for k in knobs if k not in KNOBS]
        if unknown:
            raise bad_option("knobs", f"unknown knob '{unknown[0]}' (knobs: {', '.join(KNOBS)})")
        bad = [m for m in modules or () if m not in MODULE_KINDS]
        if bad:
            raise bad_option("modules", f"unknown module kind '{bad[0]}' (kinds: {', '.join(MODULE_KINDS)})")
        if trials is not None and trials < 1:
            raise bad_option("trials", f"must be at least 1 (or left out: until the search stops), got {trials}")
        self.genome_id = genome_id
        self.trials = trials
        self.multi_objective = multi_objective
        self.storage = storage
        self.study_name = study_name
        self.heartbeat_s = max(1, int(heartbeat_s))
        self.owner = {**_me(), "token": uuid.uuid4().hex[:8]}
        """Marks this process's trials in a shared study."""
        self.skipped = 0
        """Trials skipped because another process was evaluating the same knobs."""
        self._seed = 0
        self._beat_stop = threading.Event()
        self._beat: threading.Thread | None = None
        self.knobs = tuple(knobs)
        self.modules = tuple(modules) if modules else tuple(m for m in MODULE_KINDS if m != "react")
        self.temperatures = tuple(float(t) for t in temperatures)
        self.max_copies = max(1, int(max_copies))
        self.max_rounds = max(2, int(max_rounds))
        self.startup_trials = startup_trials
        self.population_size = population_size
        self.max_asks = max(1, int(max_asks))
        if max_trial_share is not None and not 0 < max_trial_share <= 1:
            raise bad_option("max_trial_share", f"must be above 0 and at most 1 (or None), got {max_trial_share}")
        self.max_trial_share = max_trial_share
        self.too_costly = 0
        """Trials told PRUNED unpaid because they would have cost more than ``max_trial_share`` of the budget."""
        self.study: Any = None
        self.base: Genome | None = None
        self.asked = 0
        self.told_free = 0
        """Trials answered from earlier results without an evaluation."""
        self._open_trials: list[Any] = []
        """Trials asked and proposed but not yet told (failed and enqueued again if the run stops)."""
        self._done: dict[str, Any] = {}

    # ------------------------------------------------------------------ study

    def setup(self, ctx: SearchContext) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)  # one line per trial would drown the run log
        if self.storage is None and ctx.run_dir is not None:
            self.storage = str(ctx.run_dir / STUDY_FILE)  # a resumed run rebuilds it (the engine deletes it)
        wanted = self._given_base(ctx)
        name = self.study_name or f"tune-{ctx.task.name}" + ("-mo" if self.multi_objective else "")
        study = self._open(name)
        stored = study.user_attrs.get("base_genome")
        if stored is not None and wanted is not None and Genome.model_validate(stored).id != wanted.id:
            # An explicitly chosen genome with its own space gets its own study next to the old one.
            study = self._open(f"{name}-{wanted.short_id}")
            stored = study.user_attrs.get("base_genome")
        if stored is not None:
            base = Genome.model_validate(stored)
        else:
            base = wanted or self._best_config(ctx)
            if base is None:
                base = self._seed(ctx)
            if base is None:
                return
            study.set_user_attr("base_genome", base.model_dump(mode="json"))
        if base.kind != "config" or not base.agents:
            ctx.emit(Note(strategy=self.name, message=f"'{base.name}' has no agents' knobs to tune"))
            return
        self.base, self.study = base, study
        self._space()
        self._seed = ctx.seed
        self._recover(study)
        if not study.trials:
            study.enqueue_trial(self._params_of(base), skip_if_exists=True)  # start from the base's own knobs
        with _quiet():
            study.sampler = self._sampler(ctx.seed + len(study.trials))
        if self._heartbeats():
            self._beat = threading.Thread(target=self._beat_loop, name="masforge-tune-heartbeat", daemon=True)
            self._beat.start()

    def _open(self, name: str) -> Any:
        import optuna

        directions = ["maximize", "minimize"] if self.multi_objective else ["maximize"]
        if not self.storage:
            return optuna.create_study(study_name=name, directions=directions)
        url = storage_url(self.storage)
        for attempt in range(5):
            try:
                # Heartbeats let a process tell a trial another process is still evaluating from one it died in.
                with _quiet():
                    storage = optuna.storages.RDBStorage(url, heartbeat_interval=self.heartbeat_s,
                                                         grace_period=3 * self.heartbeat_s)
                return optuna.create_study(study_name=name, storage=storage, directions=directions,
                                           load_if_exists=True)
            except Exception as exc:
                # Processes opening a new storage at the same moment race to create its tables; the loser's
                # insert fails and the tables are there on the next try.
                from sqlalchemy.exc import SQLAlchemyError

                if attempt == 4 or not isinstance(exc, SQLAlchemyError):
                    raise
                time.sleep(0.2 * (attempt + 1))
        raise AssertionError("unreachable")

    def _heartbeats(self) -> bool:
        """True for a study in a database (which other processes may share), where trials beat."""
        from optuna.storages._heartbeat import is_heartbeat_enabled

        storage = getattr(self.study, "_storage", None)
        return storage is not None and is_heartbeat_enabled(storage)

    def _beat_loop(self) -> None:
        while not self._beat_stop.wait(self.heartbeat_s):
            for trial in list(self._open_trials):
                try:
                    self.study._storage.record_heartbeat(trial._trial_id)
                except Exception:
                    pass  # a missed beat only risks the trial being re-run after the grace period

    def _sampler(self, seed: int) -> Any:
        import optuna

        if self.multi_objective:
            return optuna.samplers.NSGAIISampler(population_size=self.population_size, seed=seed)
        # constant_liar: trials other processes are evaluating count as bad, so a shared study spreads out.
        return optuna.samplers.TPESampler(n_startup_trials=self.startup_trials, seed=seed, constant_liar=True)

    def _recover(self, study: Any) -> None:
        """Remember completed trials (of every process working the study); fail trials whose process died and
        enqueue their knobs again."""
        import optuna
        from optuna.trial import TrialState

        running = {t.number: t for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))}
        with _quiet():
            optuna.storages.fail_stale_trials(study)  # a heartbeat older than the grace period: its process died
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL,
                                                          TrialState.RUNNING)):
            if t.state == TrialState.COMPLETE:
                self._done[self._key(t.params)] = t.values if self.multi_objective else t.value
            elif t.state == TrialState.FAIL and t.number in running:
                _requeue(study, t.params)
            elif t.state == TrialState.RUNNING and _owner_dead(t.user_attrs.get("masforge_owner"), t.datetime_start):
                try:
                    study.tell(t.number, state=TrialState.FAIL)
                except (ValueError, RuntimeError):
                    continue  # another process recovered it first
                _requeue(study, t.params)

    def _twin(self, trial: Any) -> tuple[str, Any] | None:
        """Another process's trial with the same knobs: ``("done", values)`` if one completed (since this process
        last looked), ``("running", number)`` if a lower-numbered one is being evaluated now (the lower number
        goes on, so of two processes asking the same point at once exactly one pays for it)."""
        from optuna.trial import TrialState

        key = self._key(trial.params)
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING, TrialState.COMPLETE)):
            if t.number == trial.number or self._key(t.params) != key:
                continue
            if t.state == TrialState.COMPLETE:
                self._done[key] = t.values if self.multi_objective else t.value
                return ("done", self._done[key])
            if t.number < trial.number:
                return ("running", t.number)
        return None

    def _given_base(self, ctx: SearchContext) -> Genome | None:
        if not self.genome_id:
            return None
        hits = [c for cid, c in ctx.by_id.items() if cid.startswith(self.genome_id)]
        if len(hits) != 1:
            what = "no candidate" if not hits else f"{len(hits)} candidates"
            raise ConfigError(f"tune: genome_id '{self.genome_id}' matches {what} of this run; give a longer "
                              "id prefix of an evaluated candidate or leave it out to tune the best")
        return hits[0].genome

    @staticmethod
    def _best_config(ctx: SearchContext) -> Genome | None:
        return next((c.genome for c in ctx.best(len(ctx.population)) if c.genome.kind == "config"), None)

    def _seed(self, ctx: SearchContext) -> Genome | None:
        from masforge.seeds import load_seed

        try:
            cand = ctx.try_submit(Proposal(load_seed("cot"), [], "seed", "tune starting point"))
        except BudgetExceeded:
            return None
        return cand.genome if cand else None

    # ------------------------------------------------------------------ search space

    def _space(self) -> None:
        assert self.base is not None
        base = self.base
        self._temps: dict[str, list[float | None]] = {}
        self._mods: dict[str, list[str]] = {}
        self._copies: dict[str, int] = {}
        self._adapters: dict[str, list[str]] = {}
        for a in base.agents:
            self._adapters[a.id] = list(dict.fromkeys([a.adapter, *ADAPTERS]))
            temps = sorted(set(self.temperatures) | ({a.temperature} if a.temperature is not None else set()))
            self._temps[a.id] = [None, *temps]
            kinds = [m for m in self.modules if m != "react" or a.tools]
            self._mods[a.id] = list(dict.fromkeys([a.module, *kinds]))
            self._copies[a.id] = max(self.max_copies, a.copies)
        aggs = ["last", *PICKING_AGGREGATIONS]
        self._aggs = [*aggs, "judge"] if base.topology.aggregation == "judge" else aggs
        self._cyclic = bool(cyclic_agents(base))
        self._rounds = max(self.max_rounds, base.topology.rounds)

    def _params_of(self, g: Genome) -> dict[str, Any]:
        """The trial parameters that reproduce ``g`` (the base) in this space."""
        p: dict[str, Any] = {}
        judge = g.topology.judge if g.topology.aggregation == "judge" else None
        if "aggregation" in self.knobs:
            p["aggregation"] = g.topology.aggregation
        for a in g.agents:
            if a.module == EXECUTE:
                continue  # runs code, no LM: it has no knobs
            if "temperature" in self.knobs:
                p[f"{a.id}.temperature"] = a.temperature
            if "copies" in self.knobs and a.id != judge:
                p[f"{a.id}.copies"] = a.copies
            if "module" in self.knobs:
                p[f"{a.id}.module"] = a.module
            if "adapter" in self.knobs:
                p[f"{a.id}.adapter"] = a.adapter
        if "rounds" in self.knobs and self._cyclic:
            p["rounds"] = g.topology.rounds
        return p

    def build(self, trial: Any) -> Genome:
        """The genome for an optuna trial's choices (define-by-run: the judge's knobs exist only if kept)."""
        assert self.base is not None
        g = self.base.model_copy(deep=True)
        topo = g.topology
        if "aggregation" in self.knobs:
            agg = trial.suggest_categorical("aggregation", self._aggs)
            if agg != "judge" and topo.aggregation == "judge":
                g.agents = [a for a in g.agents if a.id != topo.judge]
                topo.judge = None
            topo.aggregation = agg
        judge = topo.judge if topo.aggregation == "judge" else None
        for a in g.agents:
            if a.module == EXECUTE:
                continue  # runs code, no LM: it has no knobs
            if "temperature" in self.knobs:
                a.temperature = trial.suggest_categorical(f"{a.id}.temperature", self._temps[a.id])
            if "copies" in self.knobs and a.id != judge:
                a.copies = trial.suggest_int(f"{a.id}.copies", 1, self._copies[a.id])
            if "module" in self.knobs:
                a.module = trial.suggest_categorical(f"{a.id}.module", self._mods[a.id])
                if a.module == "program_of_thought" and "python" not in a.tools:
                    a.tools = [*a.tools, "python"]
            if "adapter" in self.knobs:
                a.adapter = trial.suggest_categorical(f"{a.id}.adapter", self._adapters[a.id])
        if "rounds" in self.knobs and self._cyclic:
            topo.rounds = trial.suggest_int("rounds", 2, self._rounds)
        if topo.aggregation in PICKING_AGGREGATIONS and answers_at_output(g) <= 1:
            topo.aggregation = "last"  # a pick from one answer is "last": same system, same id, no new cost
        g.metadata = {}
        g.name = f"{self.base.name.split('~')[0]}~tune{trial.number}"
        return g

    @staticmethod
    def _key(params: dict[str, Any]) -> str:
        return json.dumps(sorted(params.items()), default=str)

    def _values(self, cand: Candidate) -> Any:
        return [cand.score, cand.dollars] if self.multi_objective else cand.fitness

    # ------------------------------------------------------------------ ask / tell

    def step(self, ctx: SearchContext) -> list[Proposal]:
        from optuna.trial import TrialState

        if self.study is None or self.base is None:
            return []
        self._recover(self.study)  # learn what other processes finished; take over trials of dead ones
        for _ in range(self.max_asks):
            if self.trials is not None and self.asked >= self.trials:
                return []
            with _quiet():
                self.study.sampler = self._sampler(self._seed + len(self.study.trials))
                trial = self.study.ask()
            self.asked += 1
            trial.set_user_attr("masforge_owner", self.owner)
            if self._heartbeats():
                self.study._storage.record_heartbeat(trial._trial_id)
            genome = self.build(trial)
            if problems(genome):
                self.study.tell(trial, state=TrialState.FAIL)
                continue
            key = self._key(trial.params)
            if key in self._done:  # same knobs as an earlier trial: its value, for free
                self.study.tell(trial, self._done[key])
                self.told_free += 1
                continue
            twin = self._twin(trial) if self._heartbeats() else None  # only a stored study can be shared
            if twin is not None and twin[0] == "done":  # another process just paid for these knobs
                self.study.tell(trial, twin[1])
                self.told_free += 1
                continue
            if twin is not None:  # another process is paying for these knobs right now
                trial.set_user_attr("duplicate_of", twin[1])
                self.study.tell(trial, state=TrialState.FAIL)
                self.skipped += 1
                continue
            known = ctx.known(genome)
            if known is not None:
                self._done[key] = self._values(known)
                self.study.tell(trial, self._done[key])
                self.told_free += 1
                continue
            if not self.admit(ctx, genome):
                self.study.tell(trial, state=TrialState.PRUNED)  # hopeless per the surrogate; never paid
                continue
            if self._too_costly(ctx, genome):
                self.study.tell(trial, state=TrialState.PRUNED)  # TPE learns to leave the costly corner alone
                self.too_costly += 1
                continue
            knobs = ", ".join(f"{k}={v}" for k, v in sorted(trial.params.items()))
            prop = Proposal(genome, [self.base.id], "tune", f"optuna trial {trial.number}: {knobs}",
                            info={"trial": trial})
            self._open_trials.append(trial)
            return [prop]
        return []

    def _too_costly(self, ctx: SearchContext, genome: Genome) -> bool:
        """Whether ``genome`` is expected to cost more new LM calls than ``max_trial_share`` of the search's call
        budget. A startup trial is a random draw: without this one costly draw (a program-of-thought vote on
        HumanEval) can spend a small budget whole and never be scored."""
        cap = ctx.calls_share(self.max_trial_share)
        if cap is None:
            return False
        cost = ctx.costs.cost(genome) if ctx.costs.usable() else None
        needing = len(ctx.costs.evaluator.examples) if cost is None else cost.examples_missing
        expected = max(cost.missing if cost else 0, needing * lm_calls_per_example(genome))
        return expected > cap

    def screen(self, ctx: SearchContext, proposal: Proposal) -> bool:
        return True  # screened when asked (above), so the study hears PRUNED and asks again at once

    def observe(self, ctx: SearchContext, proposal: Proposal, candidate: Candidate | None) -> None:
        from optuna.trial import TrialState

        trial = proposal.info.get("trial")
        if trial is None or trial not in self._open_trials:
            return
        self._open_trials.remove(trial)
        if candidate is None:
            self.study.tell(trial, state=TrialState.FAIL)
            return
        values = self._values(candidate)
        self._done[self._key(trial.params)] = values
        self.study.tell(trial, values)

    def run(self, ctx: SearchContext) -> None:
        """As :meth:`Strategy.run`; trials asked but not evaluated when the run stops are failed and
        enqueued again, so a resumed study evaluates them first."""
        from optuna.trial import TrialState

        try:
            super().run(ctx)
        finally:
            for trial in self._open_trials:
                self.study.tell(trial, state=TrialState.FAIL)
                _requeue(self.study, trial.params)
            self._open_trials.clear()
            self._beat_stop.set()

    def report(self) -> dict[str, Any]:
        """Trials asked, answered for free, the best trial(s) and surrogate counts."""
        out: dict[str, Any] = {"asked": self.asked, "told_free": self.told_free, "skipped": self.skipped,
                               "too_costly": self.too_costly,
                               "surrogate": self.filter.stats() if self.filter else None}
        if self.study is not None:
            out["trials"] = len(self.study.trials)
            try:
                best = self.study.best_trials if self.multi_objective else [self.study.best_trial]
                out["best"] = [{"number": t.number, "values": t.values, "params": t.params} for t in best]
            except ValueError:
                out["best"] = []
        return out
