"""Run configuration: a YAML file and/or CLI flags, validated with one-line errors."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from masforge.errors import ConfigError, TaskError
from masforge.evaluators.splits import split_parts
from masforge.input_limits import check_bytes, check_tree, load_yaml
from masforge.lm.budget import Budget
from masforge.redact import redact_data
from masforge.search.budget import MaxCandidates, SearchBudget

DEFAULT_SEEDS = ["io", "cot", "self_consistency", "self_refine", "debate"]
AUTO = "auto"
"""A test_limit / test_top_k that scales with the search's own size (the default)."""
DEFAULT_SPLIT = "validation+train"
"""Where candidates are selected: a task's validation and train splits together (never its test split), so a
10-point gain is not lost in the noise of a few problems (HumanEval: 32 + 32 problems)."""
DEFAULT_LIMIT = 64
DEFAULT_MAX_CANDIDATES = 20
MAX_TEST_LIMIT = 50
MAX_TEST_TOP_K = 3


def default_test_limit(limit: int | None) -> int:
    """Held-out examples per finalist: three times the validation examples, at most 50, so a small search
    stays small (the re-scoring used to dwarf it)."""
    return MAX_TEST_LIMIT if limit is None else max(1, min(MAX_TEST_LIMIT, 3 * limit))


def default_test_top_k(max_candidates: int | None) -> int:
    """Finalists re-scored on the held-out split (besides the best seed and the best new system): one per
    five candidates, 1 to 3."""
    return MAX_TEST_TOP_K if max_candidates is None else max(1, min(MAX_TEST_TOP_K, max_candidates // 5))


class RunBudget(SearchBudget):
    """The budget of a search run: a :class:`SearchBudget` whose candidate limit defaults to
    :data:`DEFAULT_MAX_CANDIDATES`, also when the ``budget:`` section names other limits only. A default, not a
    given value (it is not in ``model_fields_set``), so a resume's budget flags override only what they name."""

    max_candidates: int | None = Field(default=DEFAULT_MAX_CANDIDATES, ge=1)


class RunConfig(BaseModel):
    """Everything a search run needs. Save/load as YAML (``config.yaml`` in the run folder)."""

    model_config = ConfigDict(extra="forbid")

    task: str
    task_options: dict[str, Any] = Field(default_factory=dict)
    data_dir: str | None = None
    strategy: list[str] = Field(default_factory=lambda: ["evolve"])
    """One strategy or a pipeline run in order (e.g. [knapsack, evolve, tune])."""
    strategy_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    seeds: list[str] = Field(default_factory=lambda: list(DEFAULT_SEEDS))
    """Seed names or genome file paths evaluated first."""
    references: list[str] = Field(default_factory=list)
    """Reference systems the best new system is compared with, paired on the held-out split, when the search ends:
    seed names, genome file paths, or ``library`` (every shipped seed that runs on the task; raced on the selection
    set first, the best re-scored)."""
    lm: str | dict[str, Any] | None = None
    """Worker LM (None: the embedded local model)."""
    meta_lm: str | dict[str, Any] | None = None
    api_base: str | None = None
    """Endpoint of the worker LM (an OpenAI-compatible server for an ``openai/`` model)."""
    api_key_env: str | None = None
    """Environment variable holding the worker LM's API key (None: the provider's own, e.g. OPENAI_API_KEY)."""
    budget: RunBudget = Field(default_factory=RunBudget)
    """Limits of the whole run; the held-out re-scoring gets ``budget.test_share`` of each spend limit."""
    concurrency: int = Field(default=4, ge=1, le=256)
    split: str = DEFAULT_SPLIT
    """The selection set candidates are scored on: a split, or several joined with ``+``; never the held-out one."""
    limit: int | None = Field(default=DEFAULT_LIMIT, ge=1)
    """Examples of the search split each candidate is scored on (at most)."""
    race: bool = True
    """Race candidates against the incumbent: score in batches and stop a candidate as soon as a paired test says it
    is worse (see :mod:`masforge.evaluators.racing`); off: every candidate is scored on the whole selection set."""
    race_first: int = Field(default=16, ge=1)
    """Examples in a race's first batch."""
    race_batch: int = Field(default=16, ge=1)
    """Examples in each later batch of a race (one look of the paired test each)."""
    race_confidence: float = Field(default=0.95, ge=0.5, lt=1)
    """Confidence of the race's paired test: a candidate is dropped when the interval lies below 0."""
    test_split: str = "test"
    test_limit: int | None = Field(default=None, ge=1)
    """Held-out examples per finalist (None: all); ``auto`` (the default): :func:`default_test_limit`."""
    test_top_k: int = Field(default=MAX_TEST_TOP_K, ge=0)
    """Finalists re-scored on the held-out split; ``auto`` (the default): :func:`default_test_top_k`."""
    cascade_first: int | None = Field(default=None, ge=1)
    """Score this many examples first and stop early if the candidate cannot reach the best."""
    max_unscored: float = Field(default=0.2, ge=0, lt=1)
    """Share of a candidate's examples that may be unscored (the provider or sandbox failed); above it the
    candidate is incomplete: stored without a score and evaluated again later."""
    cost_weight: float = Field(default=0.0, ge=0)
    cache: bool = True
    """Reuse LM answers cached by other runs (False: the run keeps its own answer cache in its folder, so a resume
    still pays nothing twice)."""
    seed: int = 0
    output: str = "runs"
    name: str | None = None
    archive: str | None = None
    """Archive path (default: <run folder>/archive); several runs may share one."""
    executor: Literal["local", "ray"] = "local"
    """Where evaluations run: threads of this process, or the worker processes of a Ray cluster."""
    ray_address: str | None = None
    """Ray cluster to join (``auto``: the one started on this machine with ``ray start``; ``HOST:PORT``: a head
    node; unset: a new local cluster)."""
    ray_workers: int | None = Field(default=None, ge=1)
    """Evaluation worker processes on the Ray cluster (unset: one per CPU of the cluster)."""

    @model_validator(mode="before")
    @classmethod
    def _scaled_defaults(cls, data: Any) -> Any:
        """Resolve ``auto`` (or an absent) test_limit / test_top_k from the search's own size."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if data.get("test_limit", AUTO) == AUTO:
            limit = data.get("limit", DEFAULT_LIMIT)
            data["test_limit"] = default_test_limit(limit if isinstance(limit, int) else None)
        if data.get("test_top_k", AUTO) == AUTO:
            budget = data.get("budget") or {}
            cap = budget.get(MaxCandidates.field, DEFAULT_MAX_CANDIDATES) if isinstance(budget, dict) else getattr(
                budget, MaxCandidates.field, DEFAULT_MAX_CANDIDATES)
            data["test_top_k"] = default_test_top_k(cap if isinstance(cap, int) else None)
        return data

    @model_validator(mode="after")
    def _selection_apart_from_test(self) -> RunConfig:
        try:
            search, held_out = split_parts(self.split), split_parts(self.test_split)
        except TaskError as exc:
            raise ValueError(str(exc)) from None
        shared = [s for s in search if s in held_out]
        if shared:
            raise ValueError(f"the search split '{self.split}' (--split) includes the held-out split '{shared[0]}': "
                             f"a system selected on the data it is tested on says nothing; search on e.g. "
                             f"{DEFAULT_SPLIT}")
        return self

    @field_validator("strategy", mode="before")
    @classmethod
    def _split_pipeline(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [s.strip() for s in value.replace("+", ",").split(",") if s.strip()]
        return value

    @field_validator("budget", mode="before")
    @classmethod
    def _search_budget(cls, value: Any) -> Any:
        """A :class:`Budget` given in Python becomes a :class:`RunBudget` with the same given limits and conditions
        (a limit it leaves unset keeps the search's default)."""
        if isinstance(value, Budget) and not isinstance(value, RunBudget):
            return RunBudget(value.conditions, **value.model_dump(include={"test_share"}, exclude_unset=True))
        return value

    @field_validator("seeds", "references", mode="before")
    @classmethod
    def _split_seeds(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [s.strip() for s in value.split(",") if s.strip()]
        return value

    @classmethod
    def load(cls, path: str | Path) -> RunConfig:
        """Read a run configuration file: bounded in size and nesting, duplicate keys are an error, YAML
        anchors/aliases are allowed (a config may reuse a block) but may not recurse or expand without bound."""
        p = Path(path)
        try:
            check_bytes(p.stat().st_size, str(p), "run-configuration files", ConfigError)
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{p}: cannot read run configuration ({exc.strerror})") from None
        except UnicodeDecodeError:
            raise ConfigError(f"{p}: run configuration is not UTF-8 text; save it as UTF-8") from None
        data = load_yaml(text, str(p), ConfigError, aliases=True, what="run-configuration files",
                         label="run configuration")
        if data is not None and not isinstance(data, dict):
            raise ConfigError(f"{p}: a run configuration must be a mapping of fields, got {type(data).__name__}")
        return cls.from_data(data or {}, str(p))

    @classmethod
    def from_data(cls, data: dict[str, Any], origin: str = "run configuration",
                  names: Mapping[str, str] | None = None) -> RunConfig:
        """Validate ``data``; one ConfigError line naming the field, or the name the user typed for it
        (``names``: field path -> e.g. the command-line flag, so ``budget.max_dollars`` is ``--budget-usd``)."""
        check_tree(data, origin, ConfigError)
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            place = ".".join(str(x) for x in err["loc"]) or "config"
            msg = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
            raise ConfigError(f"{origin}: {(names or {}).get(place, place)}: {msg}") from None

    def dump(self, path: str | Path) -> None:
        """Write the configuration as YAML to ``path`` (keys redacted; written whole or not at all)."""
        # A key pasted into the config (e.g. in lm.extra) must not be copied into the run folder.
        data = redact_data(self.model_dump(mode="json"))
        # Temp file + rename: a run killed while saving keeps no half-written config, so --resume can read it.
        target = Path(path)
        tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
        tmp.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        os.replace(tmp, target)
