"""Run configuration: a YAML file and/or CLI flags, validated with one-line errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from masforge.errors import ConfigError
from masforge.genome.io import format_yaml_error

DEFAULT_SEEDS = ["io", "cot", "self_consistency", "self_refine", "debate"]


class BudgetConfig(BaseModel):
    """Limits of a search (None: unlimited). The held-out test re-scoring is outside this budget."""

    model_config = ConfigDict(extra="forbid")

    max_dollars: float | None = Field(default=None, ge=0)
    max_calls: int | None = Field(default=None, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_candidates: int | None = Field(default=20, ge=1)
    max_seconds: float | None = Field(default=None, gt=0)
    patience: int | None = Field(default=None, ge=1)


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
    lm: str | dict[str, Any] | None = None
    """Worker LM (None: the embedded local model)."""
    meta_lm: str | dict[str, Any] | None = None
    api_base: str | None = None
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    concurrency: int = Field(default=4, ge=1, le=256)
    split: str = "validation"
    limit: int | None = Field(default=20, ge=1)
    """Examples of the search split each candidate is scored on."""
    test_split: str = "test"
    test_limit: int | None = Field(default=50, ge=1)
    test_top_k: int = Field(default=3, ge=0)
    cascade_first: int | None = Field(default=None, ge=1)
    """Score this many examples first and stop early if the candidate cannot reach the best."""
    cost_weight: float = Field(default=0.0, ge=0)
    seed: int = 0
    output: str = "runs"
    name: str | None = None
    archive: str | None = None
    """Archive path (default: <run folder>/archive); several runs may share one."""

    @field_validator("strategy", mode="before")
    @classmethod
    def _split_pipeline(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [s.strip() for s in value.replace("+", ",").split(",") if s.strip()]
        return value

    @field_validator("seeds", mode="before")
    @classmethod
    def _split_seeds(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [s.strip() for s in value.split(",") if s.strip()]
        return value

    @classmethod
    def load(cls, path: str | Path) -> RunConfig:
        p = Path(path)
        try:
            data = yaml.safe_load(p.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"{p}: cannot read run configuration ({exc.strerror})") from None
        except yaml.YAMLError as exc:
            raise ConfigError(format_yaml_error(p, exc, "run configuration")) from None
        return cls.from_data(data or {}, str(p))

    @classmethod
    def from_data(cls, data: dict[str, Any], origin: str = "run configuration") -> RunConfig:
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            place = ".".join(str(x) for x in err["loc"]) or "config"
            msg = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
            raise ConfigError(f"{origin}: {place}: {msg}") from None

    def dump(self, path: str | Path) -> None:
        Path(path).write_text(yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False), encoding="utf-8")
