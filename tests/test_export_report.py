"""Export and report: exported modules reproduce masforge exactly, formats round-trip, exports evaluate like
their genomes, and run reports render (also in a real headless Chromium).

Exactness is checked strictly: the exported module runs in a fresh subprocess (proving it imports no masforge)
on a dspy LM defined here, masforge runs the genome on its fake LM with the same responder, and both the outputs
and the multiset of LM calls (every prompt message, the sample index and the temperature) must be identical.
Besides masforge's own ``fake_reply`` a stricter responder is used whose answers depend on a hash of the whole
prompt and the sample index (so any difference in instructions, role line, signatures, messages, rounds or
sample indices changes the answers), that drives ReAct through real tool calls, alternates failing and working
programs for program_of_thought and stops or continues refine loops.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from masforge.cli import app
from masforge.execution.compile import compile_genome
from masforge.export import (
    CODE_WARNING,
    export_genome,
    is_exported,
    load_exported,
    read_marker,
    resolve_genome,
)
from masforge.genome.io import load_genome, parse_genome_text
from masforge.lm.client import LMClient
from masforge.lm.fake import fake_reply
from masforge.seeds import seed_paths

ROOT = Path(__file__).resolve().parents[1]
CONFIG_SEEDS = [p for p in seed_paths() if load_genome(p).kind == "config"]
CODE_SEEDS = [p for p in seed_paths() if load_genome(p).kind == "code"]
QUESTIONS = ["What is 3 + 4 * 2?", "Compute 12 * 7 - 5.", "Name the capital of France."]
RESPONDERS = {"fake": QUESTIONS[:2], "strict": QUESTIONS}

# Shared by this process (masforge side) and the subprocess (exported side): a prompt-sensitive responder and
# a dspy LM that answers with a responder, passing dspy's rollout_id as the sample index.
RESPONDER_SRC = r'''
import hashlib
import json
import re
import threading
from types import SimpleNamespace

import dspy

from masforge.lm.fake import arithmetic_answer as _arith
from masforge.lm.fake import fake_reply, input_values, output_fields


def strict_reply(messages, info):
    fields = output_fields(messages)
    inputs = input_values(messages)
    blob = json.dumps(messages, sort_keys=True) + "|" + str(info.get("sample", 0))
    digest = hashlib.sha256(blob.encode()).hexdigest()[:8]
    n = int(digest, 16)
    first = next(iter(inputs.values()), "")
    arith = _arith(first) or "0"
    if not fields:
        return "reply " + digest
    names = [f for f, _ in fields]
    choice = None
    if "next_tool_name" in names:
        options = re.findall(r"'(\w+)'", dict(fields)["next_tool_name"])
        done = "observation_0" in inputs.get("trajectory", "")
        choice = "finish" if done or options == ["finish"] else options[0]
    parts = []
    for name, typ in fields:
        if name == "next_tool_name":
            value = choice
        elif name == "next_tool_args":
            if choice == "finish":
                value = "{}"
            elif choice == "python":
                value = json.dumps({"arg": "print(%s + %d)" % (arith, n % 7)})
            else:
                value = json.dumps({"arg": "%s * %d" % (arith, n % 5 + 1)})
        elif name in ("reasoning", "next_thought", "critique", "reflection", "plan", "principles"):
            value = "step " + digest
        elif typ.startswith("bool"):
            value = "True" if n % 3 == 0 else "False"
        elif name == "code":
            value = ("```python\nprint(%s * %d)\n```" % (arith, n % 4)) if n % 2 else \
                "```python\nraise ValueError('boom')\n```"
        else:
            value = arith if n % 3 else "%s (%s)" % (arith, digest)
        parts.append("[[ ## %s ## ]]\n%s" % (name, value))
    return "\n\n".join(parts) + "\n\n[[ ## completed ## ]]"


RESPONDERS = {"fake": fake_reply, "strict": strict_reply}


class Recorder:
    """Answers with a responder and records every call (messages, sample, temperature)."""

    def __init__(self, responder):
        self.responder = responder
        self.calls = []
        self.lock = threading.Lock()

    def __call__(self, messages, info):
        text = self.responder(messages, info)
        with self.lock:
            self.calls.append(json.dumps({"messages": messages, "sample": info.get("sample", 0),
                                          "temperature": info.get("temperature")}, sort_keys=True))
        return text


class ResponderLM(dspy.BaseLM):
    """A deterministic dspy LM: the sample index is dspy's rollout_id."""

    def __init__(self, responder, temperature=0.0):
        super().__init__(model="test/responder", temperature=temperature, max_tokens=1024, cache=False,
                         num_retries=0)
        self.responder = responder

    def forward(self, prompt=None, messages=None, **kwargs):
        merged = {**self.kwargs, **kwargs}
        msgs = messages if messages is not None else [{"role": "user", "content": prompt or ""}]
        text = self.responder(msgs, {"sample": int(merged.get("rollout_id") or 0),
                                     "temperature": merged.get("temperature")})
        message = SimpleNamespace(content=text, tool_calls=None, reasoning_content=None)
        choice = SimpleNamespace(message=message, finish_reason="stop", logprobs=None)
        return SimpleNamespace(choices=[choice], usage={"prompt_tokens": 0, "completion_tokens": 0,
                                                        "total_tokens": 0}, model="test/responder")
'''

HARNESS_SRC = r'''
import importlib.util
import json
import os
import sys

job = json.loads(open(sys.argv[1], encoding="utf-8").read())
modules = {}
for name, path in job["modules"].items():
    spec = importlib.util.spec_from_file_location("exported_" + name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    modules[name] = module
standalone = not any(m == "masforge" or m.startswith("masforge.") for m in sys.modules)

exec(open(sys.argv[2], encoding="utf-8").read())  # RESPONDER_SRC (imports masforge.lm.fake: after the check)

results = {}
for name, module in modules.items():
    for responder_name, questions in job["responders"].items():
        for q in questions:
            recorder = Recorder(RESPONDERS[responder_name])
            lm = ResponderLM(recorder)
            for attr, value in job.get("lm_attrs", {}).items():  # e.g. the LM's prompt adapter choice
                setattr(lm, attr, value)
            program = module.build(lm=lm)
            try:
                outputs = program.run(**{k: q for k in module.INPUTS})[0]
            except Exception as exc:
                outputs = "error: " + type(exc).__name__
            if isinstance(outputs, dict):  # calling the dspy.Module gives the same, as a Prediction
                lm = ResponderLM(RESPONDERS[responder_name])
                for attr, value in job.get("lm_attrs", {}).items():
                    setattr(lm, attr, value)
                again = module.build(lm=lm)(**{k: q for k in module.INPUTS})
                assert dict(again) == outputs, (dict(again), outputs)
            results["%s|%s|%s" % (name, responder_name, q)] = {"outputs": outputs, "calls": recorder.calls}
json.dump({"standalone": standalone, "results": results}, open(sys.argv[3], "w", encoding="utf-8"))
'''


def _responder_namespace() -> dict[str, Any]:
    ns: dict[str, Any] = {}
    exec(RESPONDER_SRC, ns)  # noqa: S102 - test helper code defined above
    return ns


def _masforge_side(genome_path_or_genome: Any, responders: dict[str, list[str]],
                   lm: Any = "fake") -> dict[str, Any]:
    ns = _responder_namespace()
    genome = genome_path_or_genome if not isinstance(genome_path_or_genome, Path) else load_genome(
        genome_path_or_genome)
    out = {}
    for responder_name, questions in responders.items():
        for q in questions:
            recorder = ns["Recorder"](ns["RESPONDERS"][responder_name])
            system = compile_genome(genome, LMClient({"worker": lm}, cache=False, responder=recorder))
            try:
                outputs: Any = system(**{k: q for k in genome.inputs}).outputs
            except Exception as exc:
                outputs = "error: " + type(exc).__name__
            out[f"{responder_name}|{q}"] = {"outputs": outputs, "calls": recorder.calls}
    return out


def _run_exported(tmp: Path, modules: dict[str, Path], responders: dict[str, list[str]],
                  lm_attrs: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run exported modules in one fresh interpreter (``lm_attrs`` set on its LMs); returns its JSON report."""
    tmp.mkdir(parents=True, exist_ok=True)
    job, harness, responder, result = (tmp / n for n in ("job.json", "harness.py", "responder.py", "result.json"))
    job.write_text(json.dumps({"modules": {k: str(v) for k, v in modules.items()}, "responders": responders,
                               "lm_attrs": lm_attrs or {}}))
    harness.write_text(HARNESS_SRC)
    responder.write_text(RESPONDER_SRC)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.run([sys.executable, str(harness), str(job), str(responder), str(result)], cwd=tmp, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(result.read_text())


def _assert_same(name: str, mine: dict[str, Any], theirs: dict[str, Any]) -> None:
    for key, expected in mine.items():
        got = theirs[f"{name}|{key}"]
        assert got["outputs"] == expected["outputs"], f"{name} {key}: outputs differ"
        assert Counter(got["calls"]) == Counter(expected["calls"]), f"{name} {key}: LM calls differ"
        assert expected["calls"], f"{name} {key}: no LM call made"


def _assert_no_masforge_dependency(text: str) -> None:
    """The only masforge import an export holds is the optional one that starts the embedded model where masforge is
    installed: inside a function and a try that turns its absence into a one-line hint."""
    lines = re.findall(r"^\s*(?:import|from)\s+masforge\b.*$", text, re.M)
    assert [ln.strip() for ln in lines] == ["from masforge.local_model import ensure_local_server"], lines
    tree = ast.parse(text)
    tries = [n for n in ast.walk(tree) if isinstance(n, ast.Try)
             and any(isinstance(b, ast.ImportFrom) and (b.module or "").startswith("masforge") for b in n.body)]
    assert len(tries) == 1
    assert any(isinstance(h.type, ast.Name) and h.type.id == "ImportError" for h in tries[0].handlers)


def _export_to(genome: Any, path: Path) -> Path:
    path.write_text(export_genome(genome, "python", path.name), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------------
# config seeds: exact reproduction in a fresh subprocess


@pytest.fixture(scope="module")
def seed_exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("seed_exports")
    modules = {p.stem: _export_to(load_genome(p), tmp / f"{p.stem}.py") for p in CONFIG_SEEDS}
    report = _run_exported(tmp / "run", modules, RESPONDERS)
    return {"modules": modules, "report": report}


@pytest.mark.parametrize("seed", CONFIG_SEEDS, ids=lambda p: p.stem)
def test_exported_config_seed_reproduces_masforge(seed: Path, seed_exports: dict[str, Any]) -> None:
    mine = _masforge_side(seed, RESPONDERS)
    _assert_same(seed.stem, mine, seed_exports["report"]["results"])


def test_exported_modules_are_standalone(seed_exports: dict[str, Any]) -> None:
    assert seed_exports["report"]["standalone"], "importing an exported module imported masforge"
    for path in seed_exports["modules"].values():
        text = path.read_text()
        _assert_no_masforge_dependency(text)
        compile(text, str(path), "exec")
        marker = read_marker(path)
        assert marker is not None and marker["kind"] == "config"
        assert marker["genome_id"] == load_genome(ROOT / "seeds" / f"{path.stem}.yaml").id
        assert "def build(" in text and 'if __name__ == "__main__":' in text and "class System(dspy.Module)" in text
        # the agents' instructions are readable constants
        assert re.search(r"^[A-Z0-9_]+_INSTRUCTIONS = ", text, re.M)


def test_exported_modules_are_ruff_clean(seed_exports: dict[str, Any]) -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed")
    files = [str(p) for p in seed_exports["modules"].values()]
    proc = subprocess.run([ruff, "check", "--isolated", "--line-length", "120", "--select", "E,F,W,I,UP,B", *files],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_exported_tools_match_masforge(seed_exports: dict[str, Any]) -> None:
    from masforge.sandbox.tools import calculate, run_python_tool

    def load(name: str) -> Any:
        spec = importlib.util.spec_from_file_location(f"tools_{name}", seed_exports["modules"][name])
        module = importlib.util.module_from_spec(spec)
        assert spec.loader is not None
        spec.loader.exec_module(module)
        return module

    calc = load("react_calculator").DEFAULT_TOOLS["calculator"]
    for expr in ["(3 + 4) * 2 / 7", "2 ^ 10", "sqrt(16) + pi", "1,000 * 3", "7 / 2", "10 // 3 = 3", "-5 % 3",
                 "2 ** 5000", "__import__('os')", "1 +", "round(2.567, 2)"]:
        try:
            expected: Any = calculate(expr)
        except Exception as exc:  # noqa: BLE001
            expected = type(exc).__name__
        try:
            got: Any = calc(expr)
        except Exception as exc:  # noqa: BLE001
            got = type(exc).__name__
        assert got == expected, expr
    run_python = load("program_of_thought").DEFAULT_TOOLS["python"]
    for code in ["print(6 * 7)", "```python\nprint('fenced')\n```", "x = 1", "raise ValueError('bad')",
                 "print('partial')\nraise KeyError(3)", "def f(:\n  pass", "import sys\nsys.exit(2)",
                 "if __name__ == '__main__':\n    print('main')\nprint(__name__)", "print({'b', 'a', 'c', 'd'})"]:
        assert run_python(code) == run_python_tool(code), code


# ------------------------------------------------------------------------------------------------
# a searched system


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    import masforge

    tmp = tmp_path_factory.mktemp("run")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MASFORGE_CACHE", str(tmp / "cache"))
        return masforge.optimize("rg:basic_arithmetic", strategy=["random", "evolve"], budget=14, lm="fake",
                                 seeds=["cot", "self_consistency", "debate", "io"], limit=4, test_limit=4,
                                 output=tmp / "runs", progress=False)


def _searched(small_run: Any, k: int = 3) -> list[Any]:
    found = [c for c in small_run.candidates if c.operator != "seed" and c.genome.kind == "config"]
    assert found, "the search produced no new config system"
    return sorted(found, key=lambda c: -c.generation)[:k]


def test_exported_searched_system_reproduces_masforge(small_run: Any, tmp_path: Path) -> None:
    cands = _searched(small_run)
    runner = CliRunner()
    modules = {}
    for cand in cands:
        out = tmp_path / f"searched_{cand.short_id}.py"
        res = runner.invoke(app, ["export", cand.id[:10], "--archive", str(small_run.archive_path), "-o", str(out)])
        assert res.exit_code == 0, res.output
        assert read_marker(out)["genome_id"] == cand.id
        modules[cand.short_id] = out
    report = _run_exported(tmp_path / "run", modules, RESPONDERS)
    assert report["standalone"]
    for cand in cands:
        _assert_same(cand.short_id, _masforge_side(cand.genome, RESPONDERS), report["results"])


# ------------------------------------------------------------------------------------------------
# yaml / json round trip, resolution, CLI errors


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_yaml_json_round_trip_keeps_the_id(fmt: str, small_run: Any, tmp_path: Path) -> None:
    genomes = [load_genome(p) for p in seed_paths()] + [c.genome for c in _searched(small_run)]
    for genome in genomes:
        text = export_genome(genome, fmt)
        assert parse_genome_text(text, "export", fmt).id == genome.id, genome.name
    cand = _searched(small_run, 1)[0]
    out = tmp_path / f"best.{fmt}"
    res = CliRunner().invoke(app, ["export", cand.id[:12], "-a", str(small_run.archive_path), "--format", fmt,
                                   "--output", str(out)])
    assert res.exit_code == 0, res.output
    assert load_genome(out).id == cand.id
    res = CliRunner().invoke(app, ["export", "cot", "--format", fmt])
    assert res.exit_code == 0
    assert parse_genome_text(res.stdout, "stdout", fmt).id == load_genome(ROOT / "seeds" / "cot.yaml").id


def test_resolve_genome_and_cli_errors(tmp_path: Path) -> None:
    cot = load_genome(ROOT / "seeds" / "cot.yaml")
    assert resolve_genome("cot").id == cot.id
    assert resolve_genome(str(ROOT / "seeds" / "cot.yaml")).id == cot.id
    runner = CliRunner()
    for args, needle in ((["export", "no_such_thing"], "neither a genome file"),
                         (["export", "cot", "--format", "toml"], "unknown --format"),
                         (["export", "abc123", "--archive", str(tmp_path / "none")], "no archive there")):
        res = runner.invoke(app, args)
        assert res.exit_code == 1, res.output
        assert needle in res.output and "Traceback" not in res.output


# ------------------------------------------------------------------------------------------------
# code genomes


@pytest.mark.parametrize("seed", CODE_SEEDS, ids=lambda p: p.stem)
def test_code_export_warns_and_reproduces_masforge(seed: Path, tmp_path: Path) -> None:
    genome = load_genome(seed)
    path = _export_to(genome, tmp_path / f"{seed.stem}.py")
    text = path.read_text()
    docstring = text.split('"""')[1]
    assert docstring.lstrip().startswith("WARNING") and "automated search" in docstring and "sandbox" in docstring
    assert " ".join(CODE_WARNING.split()) in " ".join(docstring.split())
    assert not re.search(r"^\s*(import|from)\s+dspy\b", text, re.M)
    _assert_no_masforge_dependency(text)
    marker = read_marker(path)
    assert marker is not None and marker["kind"] == "code" and marker["genome_id"] == genome.id
    spec = importlib.util.spec_from_file_location(f"code_{seed.stem}", path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    assert module.SYSTEM_CODE.strip() == (genome.code or "").strip()

    def complete(messages: list[dict[str, Any]], temperature: float, sample: int, alias: str) -> str:
        return fake_reply(messages, {"sample": sample})

    system = module.build(complete=complete)
    expected = compile_genome(genome, LMClient({"worker": "fake"}, cache=False))
    for q in QUESTIONS:
        assert system(question=q) == expected(question=q).outputs


# ------------------------------------------------------------------------------------------------
# transfer: evaluating an exported module


@pytest.mark.parametrize("seed", ["cot", "self_consistency", "debate", "program_of_thought", "code_ensemble"])
def test_evaluate_exported_matches_genome(seed: str, tmp_path: Path) -> None:
    from masforge.evaluators.runner import Evaluator
    from masforge.evaluators.tasks import get_task
    from masforge.seeds import load_seed

    genome = load_seed(seed)
    path = _export_to(genome, tmp_path / f"{seed}.py")
    assert is_exported(path) and not is_exported(ROOT / "seeds" / "code_ensemble.py")
    system = load_exported(path)
    assert system.id == genome.id and system.inputs == genome.inputs
    task = get_task("rg:basic_arithmetic")
    want = Evaluator(task, LMClient({"worker": "fake"}, cache=False), limit=4).evaluate(genome)
    got = Evaluator(task, LMClient({"worker": "fake"}, cache=False), limit=4).evaluate(system)
    assert got.genome_id == want.genome_id
    assert got.score == want.score and got.n == want.n and not got.failures.get("exception")
    assert [e.outputs for e in got.examples] == [e.outputs for e in want.examples]
    assert (got.tokens, got.llm_calls) == (want.tokens, want.llm_calls)
    # the trace records the same agent calls (the exported module calls masforge's agent_call hook)
    summary = sorted((c["agent"], c["copy"], c["round"], json.dumps(c["outputs"])) for c in got.examples[0].trace)
    assert summary == sorted((c["agent"], c["copy"], c["round"], json.dumps(c["outputs"]))
                             for c in want.examples[0].trace)


def test_evaluate_cli_accepts_exported_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASFORGE_CACHE", str(tmp_path / "cache"))
    runner = CliRunner()
    path = tmp_path / "sc.py"
    assert runner.invoke(app, ["export", "self_consistency", "-o", str(path)]).exit_code == 0
    scores = []
    for ref, out in ((str(path), tmp_path / "a.json"), ("self_consistency", tmp_path / "b.json")):
        res = runner.invoke(app, ["evaluate", ref, "--task", "rg:basic_arithmetic", "--lm", "fake", "--limit", "3",
                                  "--no-cache", "-o", str(out)])
        assert res.exit_code == 0, res.output
        data = json.loads(out.read_text())
        scores.append((data["score"], data["genome_id"], data["tokens"]))
    assert scores[0] == scores[1]


# ------------------------------------------------------------------------------------------------
# the exported command line against an OpenAI-compatible stub server


MAIN_HARNESS_SRC = r'''
import contextlib
import io
import json
import runpy
import sys

job = json.loads(open(sys.argv[1], encoding="utf-8").read())
result_path = sys.argv[2]
results = []
for argv in job["runs"]:
    sys.argv = argv
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_path(argv[0], run_name="__main__")  # exactly what `python exported.py ...` runs
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    results.append({"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()})
json.dump(results, open(result_path, "w", encoding="utf-8"))
'''


def test_exported_command_line_matches_masforge_run(tmp_path: Path) -> None:
    from masforge.seeds import load_seed

    stub_server = pytest.importorskip("masforge.testing.stub_server")
    ns = _responder_namespace()

    def responder(messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
        # masforge and the export both send the sample index as the provider seed when sampling
        return ns["strict_reply"](messages, {"sample": body.get("seed", 0)})

    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "MASFORGE_CACHE": str(tmp_path / "cache")}
    question = "What is 6 * 7 + 1?"
    seeds = ("self_consistency", "debate", "code_ensemble")
    paths = [_export_to(load_seed(s), tmp_path / f"{s}.py") for s in seeds]
    with stub_server.StubServer(responder=responder) as stub:
        runs = [[str(p), question, "--model", "openai/stub", "--api-base", stub.api_base, "--json"] for p in paths]
        runs.append([str(paths[1]), "--model", "openai/stub"])  # no input given
        (tmp_path / "job.json").write_text(json.dumps({"runs": runs}))
        (tmp_path / "main_harness.py").write_text(MAIN_HARNESS_SRC)
        proc = subprocess.run([sys.executable, str(tmp_path / "main_harness.py"), str(tmp_path / "job.json"),
                               str(tmp_path / "out.json")], capture_output=True, text=True, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        exported = json.loads((tmp_path / "out.json").read_text())
        for seed, result in zip(seeds, exported, strict=False):
            assert result["code"] == 0, result["stderr"][-2000:]
            ours = CliRunner().invoke(app, ["run", seed, "-i", question, "--lm", "openai/stub", "--api-base",
                                            stub.api_base, "--json", "--no-cache"])
            assert ours.exit_code == 0, ours.output
            assert json.loads(result["stdout"]) == json.loads(ours.stdout)["outputs"]
    assert exported[-1]["code"] == 2 and "question" in exported[-1]["stderr"]


# ------------------------------------------------------------------------------------------------
# the prompt adapter travels with the export


def _with_adapter(genome: Any, adapter: str) -> Any:
    # an execute node sends no prompt (validation refuses an adapter on it)
    agents = [a.model_copy(update={"adapter": adapter}) if a.module != "execute" else a for a in genome.agents]
    return genome.model_copy(update={"agents": agents})


@pytest.fixture(scope="module")
def plain_exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every config seed exported twice: with every agent's adapter gene set to plain, and unchanged (auto) to be
    run on an LM whose configuration chooses plain."""
    tmp = tmp_path_factory.mktemp("plain_exports")
    genes = {p.stem: _with_adapter(load_genome(p), "plain") for p in CONFIG_SEEDS}
    gene_modules = {name: _export_to(g, tmp / f"gene_{name}.py") for name, g in genes.items()}
    auto_modules = {p.stem: tmp / f"{p.stem}.py" for p in CONFIG_SEEDS}
    for p in CONFIG_SEEDS:
        _export_to(load_genome(p), auto_modules[p.stem])
    return {"genes": genes,
            "gene": _run_exported(tmp / "gene", gene_modules, RESPONDERS),
            "lm": _run_exported(tmp / "lm", auto_modules, RESPONDERS, lm_attrs={"adapter": "plain"})}


@pytest.mark.parametrize("seed", CONFIG_SEEDS, ids=lambda p: p.stem)
def test_plain_adapter_gene_makes_the_same_requests_as_masforge(seed: Path, plain_exports: dict[str, Any]) -> None:
    genome = plain_exports["genes"][seed.stem]
    mine = _masforge_side(genome, RESPONDERS)
    _assert_same(seed.stem, mine, plain_exports["gene"]["results"])
    calls = [json.loads(c) for r in mine.values() for c in r["calls"]]
    assert all("[[ ##" not in m["content"] for c in calls for m in c["messages"]), "not the plain adapter"


@pytest.mark.parametrize("seed", CONFIG_SEEDS, ids=lambda p: p.stem)
def test_lm_configuration_adapter_choice_is_kept_by_the_export(seed: Path, plain_exports: dict[str, Any]) -> None:
    from masforge.lm.client import LMConfig

    mine = _masforge_side(seed, RESPONDERS, lm=LMConfig(model="fake", temperature=0.0, adapter="plain"))
    _assert_same(seed.stem, mine, plain_exports["lm"]["results"])
    calls = [json.loads(c) for r in mine.values() for c in r["calls"]]
    assert all("[[ ##" not in m["content"] for c in calls for m in c["messages"]), "not the plain adapter"


def test_exported_system_on_the_embedded_model_makes_masforges_requests(tmp_path: Path) -> None:
    """A system found on the embedded model runs on it by default, with masforge's auto choice (plain), sending the
    same request bodies as masforge; the 'embedded model' here is a stub server masforge is pointed at."""
    from masforge.local_model import EXTERNAL_API_BASE_ENV
    from masforge.seeds import load_seed

    stub_server = pytest.importorskip("masforge.testing.stub_server")
    ns = _responder_namespace()
    bodies: list[dict[str, Any]] = []

    def responder(messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
        bodies.append(body)
        return ns["strict_reply"](messages, {"sample": body.get("seed", 0)})

    question = "What is 6 * 7 + 1?"
    seeds = ("cot", "self_consistency", "debate", "code_ensemble")
    paths = [_export_to(load_seed(s), tmp_path / f"{s}.py") for s in seeds]
    assert all('"model": "local"' in p.read_text() for p in paths)  # masforge's default LM: the embedded model
    with stub_server.StubServer(responder=responder) as stub:
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "MASFORGE_CACHE": str(tmp_path / "cache"),
               EXTERNAL_API_BASE_ENV: stub.api_base}
        runs = [[str(p), question, "--json"] for p in paths]  # no --model: the LM it was found with
        (tmp_path / "job.json").write_text(json.dumps({"runs": runs}))
        (tmp_path / "main_harness.py").write_text(MAIN_HARNESS_SRC)
        proc = subprocess.run([sys.executable, str(tmp_path / "main_harness.py"), str(tmp_path / "job.json"),
                               str(tmp_path / "out.json")], capture_output=True, text=True, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        exported = json.loads((tmp_path / "out.json").read_text())
        theirs = list(bodies)
        bodies.clear()
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(EXTERNAL_API_BASE_ENV, stub.api_base)
            mp.setenv("MASFORGE_CACHE", str(tmp_path / "cache"))
            for seed, result in zip(seeds, exported, strict=True):
                assert result["code"] == 0, result["stderr"][-2000:]
                ours = CliRunner().invoke(app, ["run", seed, "-i", question, "--lm", "local", "--json", "--no-cache"])
                assert ours.exit_code == 0, ours.output
                assert json.loads(result["stdout"]) == json.loads(ours.stdout)["outputs"], seed
        mine = list(bodies)
    key = lambda b: json.dumps(b, sort_keys=True)  # noqa: E731
    assert sorted(map(key, theirs)) == sorted(map(key, mine)) and mine
    assert all("[[ ##" not in m["content"] for b in mine for m in b["messages"]), "auto should be plain here"


# ------------------------------------------------------------------------------------------------
# the LM a system was found with, and one-line failures


BLOCKED_HARNESS_SRC = r'''
import contextlib
import io
import json
import runpy
import sys

sys.modules["masforge"] = None  # as if masforge were not installed: `import masforge...` raises ImportError
job = json.loads(open(sys.argv[1], encoding="utf-8").read())
result_path = sys.argv[2]
results = []
for argv in job["runs"]:
    sys.argv = argv
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_path(argv[0], run_name="__main__")
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    results.append({"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()})
json.dump(results, open(result_path, "w", encoding="utf-8"))
'''


def test_exports_fail_in_one_line_naming_the_fix(tmp_path: Path) -> None:
    from masforge.seeds import load_seed

    cot = _export_to(load_seed("cot"), tmp_path / "cot.py")
    code = _export_to(load_seed("code_ensemble"), tmp_path / "code.py")
    fake = tmp_path / "fake.py"
    fake.write_text(export_genome(load_seed("cot"), "python", fake.name, lm="fake"), encoding="utf-8")
    runs = [[str(cot), "q"], [str(code), "q"],  # the embedded model, masforge absent
            [str(cot), "q", "--model", "openai/gpt-4o-mini"], [str(code), "q", "--model", "anthropic/claude-x"],
            [str(fake), "q"], [str(cot), "q", "--model", "gpt-4o"]]
    (tmp_path / "job.json").write_text(json.dumps({"runs": runs}))
    (tmp_path / "harness.py").write_text(BLOCKED_HARNESS_SRC)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    proc = subprocess.run([sys.executable, str(tmp_path / "harness.py"), str(tmp_path / "job.json"),
                           str(tmp_path / "out.json")], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((tmp_path / "out.json").read_text())
    needles = (["pip install masforge", "masforge models pull", "--api-base"],
               ["pip install masforge", "masforge models pull", "--api-base"],
               ["OPENAI_API_KEY"], ["ANTHROPIC_API_KEY"], ["offline test LM", "--model"], ["provider prefix"])
    for argv, result, words in zip(runs, results, needles, strict=True):
        lines = result["stderr"].strip().splitlines()
        assert result["code"] == 1 and result["stdout"] == "", (argv, result)
        assert len(lines) == 1 and lines[0].startswith("error: "), (argv, result["stderr"])
        assert all(w in lines[0] for w in words), (argv, lines[0])


def test_export_records_the_lm_it_was_found_with(small_run: Any, tmp_path: Path) -> None:
    from masforge.export.found_with import found_with, lm_from_key
    from masforge.lm.client import LMConfig, parse_lm

    cand = _searched(small_run, 1)[0]
    assert found_with(cand.id, small_run.archive_path).model == "fake"  # small_run searched with lm="fake"
    out = tmp_path / "found.py"
    res = CliRunner().invoke(app, ["export", cand.id[:12], "-a", str(small_run.archive_path), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "LM: fake, the one it was found with" in res.output
    spec = importlib.util.spec_from_file_location("found_export", out)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    assert module.FOUND_WITH["model"] == "fake" and module.FOUND_WITH["temperature"] == 0.0
    res = CliRunner().invoke(app, ["export", cand.id[:12], "-a", str(small_run.archive_path), "--lm", "openai/x",
                                   "--api-base", "http://127.0.0.1:9/v1"])
    assert res.exit_code == 0, res.output
    assert '"model": "openai/x"' in res.stdout and '"api_base": "http://127.0.0.1:9/v1"' in res.stdout
    # a key's settings come back from the run configuration that made it, else from the model's defaults
    served = LMConfig(model="openai/qwen", api_base="http://h:1/v1", temperature=0.2, adapter="plain")
    assert lm_from_key(served.key(), [served]) == served
    assert lm_from_key(parse_lm("local").key()) == parse_lm("local")
    assert lm_from_key(served.key()).model == "openai/qwen"
    # the exported key never holds a secret, only the variable's name
    text = export_genome(load_genome(ROOT / "seeds" / "cot.yaml"), "python", "k.py",
                         lm=LMConfig(model="openai/gpt-4o", api_key_env="MY_KEY"))
    assert '"api_key_env": "MY_KEY"' in text


def test_exported_runtime_is_masforges_own_source() -> None:
    """The export carries masforge's runtime modules verbatim (so the two cannot drift), and only the standard
    library, dspy and litellm are imported by them."""
    import inspect

    from masforge.execution.compile import compile_genome as compile_
    from masforge.export.inline import CODE_MODULES, CONFIG_MODULES, PORTFOLIO_MODULES, inline
    from masforge.standalone import code_system, command_line, connect, plain_adapter, system

    text = export_genome(load_genome(ROOT / "seeds" / "react_calculator.yaml"), "python", "r.py")
    for obj in (system.GraphRunner, system.AgentProgram, system.normalise_answer, system.format_messages,
                system.copies_temperature, plain_adapter.PlainAdapter, plain_adapter.split_final_answer,
                connect.completion_request, command_line.command_line):
        assert inspect.getsource(obj) in text, obj.__name__
    code = export_genome(load_genome(ROOT / "seeds" / "code_ensemble.py"), "python", "c.py")
    assert inspect.getsource(code_system.CodeSystem) in code and "import dspy" not in code
    runner = compile_(load_genome(ROOT / "seeds" / "debate.yaml"), LMClient({"worker": "fake"}, cache=False))
    assert isinstance(runner.runner, system.GraphRunner)  # masforge runs genomes on the same code
    inline(sorted({*CONFIG_MODULES, *CODE_MODULES, *PORTFOLIO_MODULES, "python_tool"}))  # names unique, imports ok


def test_inlining_refuses_what_one_file_cannot_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    from masforge.export import inline as inline_mod

    sources = {"a": "import numpy\n\nX = 1\n", "b": "X = 2\n", "c": "def f():\n    import os\n    return os\n"}
    monkeypatch.setattr(inline_mod, "module_text", lambda name: sources[name])
    with pytest.raises(ValueError, match="numpy"):
        inline_mod.inline(["a"])
    sources["a"] = "X = 1\n"
    with pytest.raises(ValueError, match="'X' is defined by both a and b"):
        inline_mod.inline(["a", "b"])
    text, imports, names = inline_mod.inline_module("c")
    assert "import os" in text and not imports and names == {"f"}



# ------------------------------------------------------------------------------------------------
# report


def test_report_from_a_real_run(small_run: Any, tmp_path: Path) -> None:
    from masforge.report import build_report, front_of, render_html

    data = build_report(small_run.run_dir)
    summary = json.loads((small_run.run_dir / "summary.json").read_text())
    assert data.best is not None and data.best["id"] == summary["best"]["id"]
    assert len(data.candidates) == len(summary["candidates"]) == len(data.progress)
    assert data.median == pytest.approx(summary["median_score"])
    assert data.front and data.front == front_of(data.candidates, data.cost_key)
    assert {r["strategy"] for r in data.strategy_rows} >= {"seed", "random"}
    # the lineage is the best new system's (the best overall may be a seed, whose lineage is itself)
    assert [n.id for n in data.lineage if n.is_best] == [(data.best_new or data.best)["id"]]
    assert data.best_new is None or summary["best_new"]["id"] == data.best_new["id"]
    assert data.progress[-1]["best"] == max(c["score"] for c in data.candidates)
    assert len(data.top) == min(5, len(data.candidates))
    assert any("->" in t.diff or "~" in t.diff or "+" in t.diff for t in data.top if t.parent) or \
        all(t.parent is None for t in data.top)
    assert data.test and data.test[0]["genome_id"] == summary["test"][0]["genome_id"]
    page = render_html(data)
    for section in ("progress", "front", "lineage", "strategies", "top", "test", "spend", "candidates"):
        assert f'id="{section}"' in page
    assert page.count("<svg") >= 4
    # self-contained: nothing is fetched (the only URL is the SVG namespace, which is a name, not a request)
    assert not re.search(r"<(script|img|link|iframe)[^>]+(src|href)=", page)
    assert not re.search(r"url\((?!#)|@import", page)  # only in-document references like url(#arrow)
    assert set(re.findall(r"https?://[^\s\"'<>]+", page)) <= {"http://www.w3.org/2000/svg"}
    # the best-score card shows its confidence interval (and the held-out card its own, with the sample size)
    cards = page.split('<div class="cards">', 1)[1].split("</header>", 1)[0]
    best_card = cards.split("best selection score", 1)[1].split('<div class="card">', 1)[0]
    lo, hi = data.best["ci"]
    assert f"95% CI [{lo:.2f}, {hi:.2f}]" in best_card
    test_card = cards.split("its held-out test score", 1)[1].split('<div class="card">', 1)[0]
    assert re.search(r"95% CI \[[0-9.]+, [0-9.]+\] on \d+ examples", test_card)


def test_report_lineage_of_a_descendant(small_run: Any) -> None:
    from masforge.archive.store import Archive
    from masforge.report import lineage_svg
    from masforge.report.data import _lineage

    child = _searched(small_run, 1)[0]
    with Archive.open(small_run.archive_path) as archive:
        nodes, _ = _lineage(archive, child.id, "rg:basic_arithmetic", "validation")
    ids = {n.id for n in nodes}
    assert set(child.parents) <= ids and any(n.level > 0 for n in nodes)
    assert any(n.operator == "seed" for n in nodes)  # every lineage ends in seeds
    svg = lineage_svg(nodes)
    assert svg.count("<rect") == len(nodes) and svg.count('class="edge"') >= len(child.parents)


def test_report_cli_and_unfinished_run(small_run: Any, tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["report", str(small_run.run_dir)])
    assert res.exit_code == 0, res.output
    assert (small_run.run_dir / "report.html").is_file()
    assert "best" in res.output and "top systems" in res.output and "held-out test" in res.output
    # a run that never wrote summary.json is still reported (from events.jsonl and the archive)
    copy = tmp_path / "unfinished"
    shutil.copytree(small_run.run_dir, copy, symlinks=True)
    (copy / "summary.json").unlink()
    out = tmp_path / "r.html"
    res = runner.invoke(app, ["report", str(copy), "--output", str(out)])
    assert res.exit_code == 0, res.output
    assert "summary.json is missing" in out.read_text() and "id=\"lineage\"" in out.read_text()
    res = runner.invoke(app, ["report", str(tmp_path / "nope")])
    assert res.exit_code == 1 and "no such run folder" in res.output


# ------------------------------------------------------------------------------------------------
# the report in a real browser


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _png_colours(data: bytes, limit: int = 50) -> int:
    """Number of distinct pixel colours (up to ``limit``) of an 8-bit RGB/RGBA PNG, decoded with zlib + struct."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    height = depth = ctype = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, ctype = struct.unpack(">IIBB", body[:10])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    assert depth == 8 and ctype in (2, 6), f"unexpected PNG format (depth {depth}, colour type {ctype})"
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    colours: set[bytes] = set()
    for y in range(height):
        ftype = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 0xFF
            elif ftype == 2:
                line[i] = (line[i] + b) & 0xFF
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        for x in range(0, stride, bpp * 7):
            colours.add(bytes(line[x:x + 3]))
        if len(colours) >= limit:
            return len(colours)
        prev = line
    return len(colours)


_ERROR_HOOK = ("<script>window.__errors=[];window.addEventListener('error',function(e){window.__errors.push("
               "String(e.message))});window.addEventListener('DOMContentLoaded',function(){var d=document."
               "createElement('div');d.id='js-errors';document.body.appendChild(d);setTimeout(function(){d."
               "textContent='errors:'+window.__errors.length+':'+window.__errors.join('|')},0)});</script>")


def _load_in_chromium(browser: str, page: Path, profile: Path) -> tuple[str, list[str], list[str]]:
    """DOM after load, the page's console lines and the errors the injected hook saw."""
    cmd = [browser, "--headless", "--disable-gpu", "--no-sandbox", "--virtual-time-budget=5000",
           "--enable-logging=stderr", "--v=0", f"--user-data-dir={profile}", "--dump-dom", page.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    hooked = re.findall(r'<div id="js-errors">([^<]*)</div>', proc.stdout)
    return proc.stdout, console, hooked


def test_report_renders_in_headless_chromium(small_run: Any, tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip("no chromium binary found (install Debian's `chromium` package to run the browser check)")
    from masforge.report import generate_report

    # The check itself must see errors: a page that throws and logs is caught by both detectors.
    bad = tmp_path / "bad.html"
    bad.write_text(f"<html><head>{_ERROR_HOOK}</head><body><p>x</p><script>undefinedFn();</script>"
                   "<script>console.error('boom')</script></body></html>")
    _, console, hooked = _load_in_chromium(browser, bad, tmp_path / "profile0")
    assert len(console) >= 2 and hooked and hooked[0].startswith("errors:1:"), (console, hooked)

    page = generate_report(small_run.run_dir, tmp_path / "report.html").read_text()
    checked = tmp_path / "checked.html"
    checked.write_text(page.replace("<head>", "<head>" + _ERROR_HOOK, 1), encoding="utf-8")
    dom, console, hooked = _load_in_chromium(browser, checked, tmp_path / "profile1")
    assert not console, console  # the report logs nothing: any console line is an error or a warning
    assert hooked == ["errors:0:"], hooked
    assert 'data-report-ready="1"' in dom, "the report's script did not run"
    assert dom.count("<svg") >= 4
    shot = tmp_path / "report.png"
    run = subprocess.run([browser, "--headless", "--disable-gpu", "--no-sandbox", "--virtual-time-budget=5000",
                          f"--user-data-dir={tmp_path / 'profile2'}", "--window-size=1280,1600",
                          f"--screenshot={shot}", checked.as_uri()], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0 and shot.is_file(), run.stderr[-2000:]
    png = shot.read_bytes()
    assert len(png) > 10_000
    assert _png_colours(png) > 8, "the screenshot is (nearly) blank"


_LAYOUT_HOOK = ("<script>window.addEventListener('load',function(){var d=document.createElement('div');"
                "d.id='layout';var r=[].map.call(document.querySelectorAll('svg.chart'),function(s){return "
                "Math.ceil(s.getBoundingClientRect().right)});d.textContent=window.innerWidth+':'+"
                "document.documentElement.scrollWidth+':'+Math.max.apply(null,r);document.body.appendChild(d)});"
                "</script>")


def test_report_charts_shrink_on_a_narrow_screen(small_run: Any, tmp_path: Path) -> None:
    """Below the charts' natural width (600 px each, 900 px and more side by side) the page does not scroll
    sideways: the charts shrink with it."""
    browser = _chromium()
    if browser is None:
        pytest.skip("no chromium binary found (install Debian's `chromium` package to run the browser check)")
    from masforge.report import generate_report

    page = generate_report(small_run.run_dir, tmp_path / "report.html").read_text()
    checked = tmp_path / "narrow.html"
    checked.write_text(page.replace("<head>", "<head>" + _LAYOUT_HOOK, 1), encoding="utf-8")
    width = 480
    cmd = [browser, "--headless", "--disable-gpu", "--no-sandbox", "--virtual-time-budget=5000",
           f"--window-size={width},1200", f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", checked.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = re.findall(r'<div id="layout">(\d+):(\d+):(\d+)</div>', proc.stdout)
    assert found, "the layout probe did not run"
    viewport, page_width, chart_right = map(int, found[0])
    assert viewport < 600  # narrower than one chart's natural width: the check means something
    assert page_width <= viewport and chart_right <= viewport, (viewport, page_width, chart_right)


def test_png_decoder_sees_a_blank_image() -> None:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    width, height = 4, 3
    raw = b"".join(b"\x00" + b"\xff\xff\xff" * width for _ in range(height))
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    assert _png_colours(png) == 1


# --------------------------------------------------------------------------------------------------
# files the user names are written without following symlinks


def test_export_and_report_replace_a_symlink_instead_of_writing_through_it(tmp_path: Path) -> None:
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me\n")
    runner = CliRunner()
    for args, name in ((["export", "cot", "--format", "python"], "system.py"),
                       (["export", "cot", "--format", "yaml"], "system.yaml"),
                       (["evaluate", "cot", "--task", "rg:basic_arithmetic", "--lm", "fake", "--limit", "2",
                         "--no-cache"], "report.json")):
        link = tmp_path / name
        link.symlink_to(victim)
        res = runner.invoke(app, [*args, "-o", str(link)])
        assert res.exit_code == 0, res.output
        assert victim.read_text() == "keep me\n", name  # the link's target is untouched ...
        assert not link.is_symlink() and link.stat().st_size > 0, name  # ... the link became the file
        assert oct(link.stat().st_mode & 0o777) != "0o600"  # an ordinary new file, not a private temp file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["precious.txt", "report.json", "system.py", "system.yaml"]
