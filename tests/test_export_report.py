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
from masforge.export import (
    CODE_WARNING,
    export_genome,
    is_exported,
    load_exported,
    read_marker,
    resolve_genome,
)
from masforge.genome.compile import compile_genome
from masforge.genome.io import load_genome, parse_genome_text
from masforge.runtime.fake_lm import fake_reply
from masforge.runtime.lm import LMClient
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

from masforge.runtime.fake_lm import fake_reply, input_values, output_fields
from masforge.runtime.tools import calculate

_ARITH = re.compile(r"(-?\d+(?:\.\d+)?\s*(?:[-+*/]\s*-?\d+(?:\.\d+)?\s*)+)")


def _arith(text):
    for expr in _ARITH.findall(text):
        try:
            return calculate(expr)
        except Exception:
            continue
    return None


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

exec(open(sys.argv[2], encoding="utf-8").read())  # RESPONDER_SRC (imports masforge.runtime.fake_lm: after the check)

results = {}
for name, module in modules.items():
    for responder_name, questions in job["responders"].items():
        for q in questions:
            recorder = Recorder(RESPONDERS[responder_name])
            program = module.build(lm=ResponderLM(recorder))
            try:
                outputs = program.run(**{k: q for k in module.INPUTS})[0]
            except Exception as exc:
                outputs = "error: " + type(exc).__name__
            if isinstance(outputs, dict):  # calling the dspy.Module gives the same, as a Prediction
                again = module.build(lm=ResponderLM(RESPONDERS[responder_name]))(**{k: q for k in module.INPUTS})
                assert dict(again) == outputs, (dict(again), outputs)
            results["%s|%s|%s" % (name, responder_name, q)] = {"outputs": outputs, "calls": recorder.calls}
json.dump({"standalone": standalone, "results": results}, open(sys.argv[3], "w", encoding="utf-8"))
'''


def _responder_namespace() -> dict[str, Any]:
    ns: dict[str, Any] = {}
    exec(RESPONDER_SRC, ns)  # noqa: S102 - test helper code defined above
    return ns


def _masforge_side(genome_path_or_genome: Any, responders: dict[str, list[str]]) -> dict[str, Any]:
    ns = _responder_namespace()
    genome = genome_path_or_genome if not isinstance(genome_path_or_genome, Path) else load_genome(
        genome_path_or_genome)
    out = {}
    for responder_name, questions in responders.items():
        for q in questions:
            recorder = ns["Recorder"](ns["RESPONDERS"][responder_name])
            system = compile_genome(genome, LMClient({"worker": "fake"}, cache=False, responder=recorder))
            try:
                outputs: Any = system(**{k: q for k in genome.inputs}).outputs
            except Exception as exc:
                outputs = "error: " + type(exc).__name__
            out[f"{responder_name}|{q}"] = {"outputs": outputs, "calls": recorder.calls}
    return out


def _run_exported(tmp: Path, modules: dict[str, Path], responders: dict[str, list[str]]) -> dict[str, Any]:
    """Run exported modules in one fresh interpreter; returns its JSON report."""
    tmp.mkdir(parents=True, exist_ok=True)
    job, harness, responder, result = (tmp / n for n in ("job.json", "harness.py", "responder.py", "result.json"))
    job.write_text(json.dumps({"modules": {k: str(v) for k, v in modules.items()}, "responders": responders}))
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
        assert not re.search(r"^\s*(import|from)\s+masforge\b", text, re.M)
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
    from masforge.runtime.tools import calculate, run_python_tool

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
    assert not re.search(r"^\s*(import|from)\s+(masforge|dspy)\b", text, re.M)
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
# report


def test_report_from_a_real_run(small_run: Any, tmp_path: Path) -> None:
    from masforge.report import build_report, pareto_front, render_html

    data = build_report(small_run.run_dir)
    summary = json.loads((small_run.run_dir / "summary.json").read_text())
    assert data.best is not None and data.best["id"] == summary["best"]["id"]
    assert len(data.candidates) == len(summary["candidates"]) == len(data.progress)
    assert data.median == pytest.approx(summary["median_score"])
    assert data.front and data.front == pareto_front(data.candidates, data.cost_key)
    assert {r["strategy"] for r in data.strategy_rows} >= {"seed", "random"}
    assert [n.id for n in data.lineage if n.is_best] == [data.best["id"]]
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


def test_png_decoder_sees_a_blank_image() -> None:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    width, height = 4, 3
    raw = b"".join(b"\x00" + b"\xff\xff\xff" * width for _ in range(height))
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    assert _png_colours(png) == 1
