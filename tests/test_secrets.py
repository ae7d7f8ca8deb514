"""Secrets are never written: a key a provider echoes back in a 401 or 400 body, or in an answer, is redacted before
it reaches the archive (git objects, commit messages, the SQLite index), the run folder (events, summary, config),
the answer cache, the report, exports and the CLI's error lines."""

from __future__ import annotations

import json
import logging
import subprocess
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from masforge.archive.records import ResultRecord
from masforge.archive.store import Archive
from masforge.cli import app
from masforge.errors import ArchiveError, LMError, ProviderError
from masforge.genome.io import parse_genome_text
from masforge.genome.validate import problems
from masforge.lm.client import LMClient, LMConfig
from masforge.redact import (
    REDACTED,
    install_log_redaction,
    redact,
    redact_data,
    redact_secret_values,
    register_secret,
)
from masforge.testing.stub_server import StubServer

TASK = "rg:basic_arithmetic"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASFORGE_CACHE", str(tmp_path / "cache"))


def _planted() -> str:
    # No known key shape: only the configuration (api_key_env) says it is a secret.
    return "plantedZ" + uuid.uuid4().hex


# ---------------------------------------------------------------------------------------------- unit level


@pytest.mark.parametrize("text, leaked", [
    ("HTTP 401: Incorrect API key provided: sk-proj-Ab12Cd34Ef56Gh78Ij90.", "sk-proj-Ab12Cd34Ef56Gh78Ij90"),
    ("headers: {'Authorization': 'Bearer abc123def456ghi789'}", "abc123def456ghi789"),
    ("Authorization: Basic dXNlcjpwYXNzd29yZDEyMw==", "dXNlcjpwYXNzd29yZDEyMw=="),
    ('{"api_key": "k9k9k9k9k9k9k9k9"}', "k9k9k9k9k9k9k9k9"),
    ("POST https://alice:s3cretpass@llm.example/v1 failed", "s3cretpass"),
    ("anthropic said sk-ant-api03-AAAABBBBCCCCDDDD1111", "sk-ant-api03-AAAABBBBCCCCDDDD1111"),
    ("google key AIzaSyA1234567890abcdefghijklmnopqrstu in url", "AIzaSyA1234567890abcdefghijklmnopqrstu"),
    ("groq gsk_0123456789abcdefghijABCDEFGHIJ rejected", "gsk_0123456789abcdefghijABCDEFGHIJ"),
])
def test_redact_known_shapes(text: str, leaked: str) -> None:
    out = redact(text)
    assert leaked not in out
    assert REDACTED in out
    assert redact(out) == out  # idempotent


@pytest.mark.parametrize("text", [
    "api_key=api_key", '"Authorization": f"Bearer {api_key}"', "bearer tokens expire",
    "hf_tokenizer_config_path", "Think step by step, then answer.", "sk-none", "password: hunter",
])
def test_redact_leaves_code_and_prose_alone(text: str) -> None:
    assert redact(text) == text


def test_environment_and_registered_values_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    env_key, registered = _planted(), _planted()
    monkeypatch.setenv("SOME_PROVIDER_API_KEY", env_key)
    monkeypatch.setenv("HOME_DIR_TOKEN_FILE", "/not/a/secret/path")
    register_secret(registered)
    data = {"a": [f"x {env_key} y", (registered,)], env_key: 1, "n": 3, "path": "/not/a/secret/path"}
    clean = redact_data(data)
    text = json.dumps(clean)
    assert env_key not in text and registered not in text
    assert clean["n"] == 3 and clean["path"] == "/not/a/secret/path"
    assert data["a"][0] == f"x {env_key} y"  # a copy: the caller's data is untouched


def test_a_key_set_in_the_environment_later_is_redacted_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment's secrets are kept between redactions (scanning it per call was a tenth of the CPU of an
    evaluation): a variable set, changed or removed since must still be seen at the next call."""
    first = "sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2"
    assert redact(f"key {first}") == f"key {REDACTED}"  # by its shape; now the cache holds the environment
    later = "q9W8e7R6t5Y4u3I2o1P0a9S8d7F6"  # no known shape: only the environment makes it a secret
    assert redact(f"x {later}") == f"x {later}"
    monkeypatch.setenv("LATER_SERVICE_API_KEY", later)
    assert redact(f"x {later}") == f"x {REDACTED}"
    changed = "z1X2c3V4b5N6m7Q8w9E0r1T2y3U4"
    monkeypatch.setenv("LATER_SERVICE_API_KEY", changed)
    assert redact(f"{later} {changed}") == f"{later} {REDACTED}"
    monkeypatch.delenv("LATER_SERVICE_API_KEY")
    assert redact(changed) == changed


def test_lm_error_is_redacted_when_made() -> None:
    key = "sk-" + "Q" * 8 + "1234567890"
    assert key not in str(LMError(f"LM 'x' failed: AuthenticationError: bad key {key}"))


def test_log_records_are_redacted(caplog: pytest.LogCaptureFixture) -> None:
    install_log_redaction()
    key = "sk-" + "L0g" * 8
    with caplog.at_level(logging.WARNING):
        logging.getLogger("some.provider").warning("request failed with key %s", key)
    assert key not in caplog.text
    assert REDACTED in caplog.text


def test_genome_holding_a_key_is_refused() -> None:
    text = ("name: leaky\nagents:\n  - id: s\n    instructions: 'call it with sk-leak0123456789abcdefXYZ'\n"
            "topology:\n  edges: ['input -> s', 's -> output']\n")
    genome = parse_genome_text(text)
    found = problems(genome)
    assert found and found[0].startswith("agents[0].instructions: holds what looks like an API key")
    assert "sk-leak" not in found[0]


def test_archive_never_stores_a_key(tmp_path: Path) -> None:
    from masforge.seeds import load_seed

    key = "sk-" + "Arch1ve" * 4
    archive = Archive.open(tmp_path / "arch", create=True)
    genome = load_seed("cot")
    archive.add(genome, rationale=f"tried with {key}")
    archive.add_result(genome.id, ResultRecord(task="t", split="validation", lm_key="m@1", score=0.5, n=2,
                                               failures={"lm": 2},
                                               extra={"failure_notes": [{"error": f"LMError: 401 {key}"}]}))
    leaky = genome.model_copy(update={"description": f"uses {key}"})
    with pytest.raises(ArchiveError, match="looks like an API key"):
        archive.add(leaky)
    archive.close()
    _assert_nowhere(tmp_path / "arch", [key])


# ---------------------------------------------------------------------------------------------- end to end


def _git_text(repo: Path) -> str:
    """Everything git holds: full history with patches, every object (reachable or not), all refs."""
    parts = [subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout
             for args in (["log", "-p", "--all", "--format=fuller"], ["for-each-ref"])]
    objects = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch-all-objects", "--batch"],
                             capture_output=True, check=True).stdout
    return "\n".join(parts) + objects.decode("utf-8", "replace")


def _assert_nowhere(root: Path, secrets: list[str]) -> int:
    """No secret in any file under ``root`` (raw bytes, so SQLite pages count) nor in any git object."""
    checked = 0
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for secret in secrets:
                assert secret.encode() not in data, f"{secret[:10]}... found in {path}"
            checked += 1
        if path.name == ".git" and path.is_dir():
            text = _git_text(path.parent)
            for secret in secrets:
                assert secret not in text, f"{secret[:10]}... found in git objects of {path.parent}"
    return checked


def test_planted_key_echoed_in_401_is_never_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    planted = _planted()
    monkeypatch.setenv("MASFORGE_PLANTED_CREDS", planted)  # an innocent-looking name: only the config marks it
    lm = {"model": "openai/stub", "api_key_env": "MASFORGE_PLANTED_CREDS", "num_retries": 0}
    runner = CliRunner()
    with StubServer(fail_first_n=10**6, fail_status=401, echo_auth=True) as stub:
        # The stub really echoes the key: the first call fails with it in the body, and stops the run.
        cfg = LMConfig(model="openai/stub", api_base=stub.api_base, api_key_env="MASFORGE_PLANTED_CREDS",
                       num_retries=0)
        with pytest.raises(ProviderError) as caught:
            LMClient({"worker": cfg}, cache=False).complete([{"role": "user", "content": "hi"}])
        assert "Incorrect API key provided" in str(caught.value) and planted not in str(caught.value)
        refused = tmp_path / "refused"
        config = {"task": TASK, "strategy": ["random"], "seeds": ["cot", "io"], "limit": 3, "budget":
                  {"max_candidates": 3}, "meta_lm": "fake", "lm": {**lm, "api_base": stub.api_base}}
        (tmp_path / "refused.yaml").write_text(json.dumps(config), encoding="utf-8")
        out = runner.invoke(app, ["search", "--config", str(tmp_path / "refused.yaml"), "-o", str(refused),
                                  "--quiet"])
        assert out.exit_code == 1 and "Incorrect API key provided" in out.output, out.output
    (refused / "cli_output.txt").write_text(out.output, encoding="utf-8")
    assert _assert_nowhere(refused, [planted]) > 5
    # A provider that quotes the key in an ordinary refusal (400): the run goes on and stores its failure notes.
    with StubServer(fail_first_n=10**6, fail_status=400, echo_auth=True) as stub:
        config = {
            "task": TASK, "strategy": ["random"], "seeds": ["cot", "io"], "limit": 3, "test_limit": 2,
            "test_top_k": 1, "budget": {"max_candidates": 3}, "meta_lm": "fake",
            "lm": {**lm, "api_base": stub.api_base},
        }
        (tmp_path / "run.yaml").write_text(json.dumps(config), encoding="utf-8")  # JSON is YAML
        out = runner.invoke(app, ["search", "--config", str(tmp_path / "run.yaml"), "-o", str(tmp_path / "runs"),
                                  "--quiet"])
        assert out.exit_code == 0, out.output
        assert stub.failures > 0
    run_dir = (tmp_path / "runs" / "latest").resolve()
    (run_dir / "cli_output.txt").write_text(out.output, encoding="utf-8")
    # The failures were recorded (so the error text did reach the write boundaries) ...
    archive = Archive.open(run_dir / "archive")
    records = archive.list(run=run_dir.name, include_pruned=True)
    notes = [n for rec in records for r in rec.results for n in r.extra.get("failure_notes", [])]
    assert any("Incorrect API key provided" in n["error"] for n in notes)
    archive.close()
    # ... then exports and the report, written into the run folder too.
    for fmt in ("python", "yaml", "json"):
        res = runner.invoke(app, ["export", records[0].genome_id[:12], "--format", fmt, "--archive",
                                  str(run_dir / "archive"), "-o", str(run_dir / f"export.{fmt}")])
        assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["report", str(run_dir)])
    assert res.exit_code == 0, res.output
    checked = _assert_nowhere(run_dir, [planted])
    assert checked > 10
    for name in ("report.html", "events.jsonl", "summary.json", "config.yaml", "archive/.masforge-index.sqlite"):
        assert (run_dir / name).is_file(), name


def test_a_key_inside_an_answer_is_not_cached_nor_scored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from masforge.lm.cache import LMCache

    planted = _planted()
    monkeypatch.setenv("MASFORGE_PLANTED_CREDS", planted)
    with StubServer(responder=lambda messages, body: f"your key is {planted}, keep it safe") as stub:
        cfg = LMConfig(model="openai/stub", api_base=stub.api_base, api_key_env="MASFORGE_PLANTED_CREDS")
        cache = LMCache(tmp_path / "answers.sqlite")
        first = LMClient({"worker": cfg}, cache=cache).complete([{"role": "user", "content": "hi"}])
        again = LMClient({"worker": cfg}, cache=cache).complete([{"role": "user", "content": "hi"}])
    assert first.text == again.text == f"your key is {REDACTED}, keep it safe" and again.cached
    assert planted.encode() not in (tmp_path / "answers.sqlite").read_bytes()
    assert all(planted.encode() not in p.read_bytes() for p in tmp_path.iterdir())


# ---------------------------------------------------------------------------------------------- variants of a key


def _variants(key: str) -> dict[str, str]:
    """A key the way an echo may change it (issue 37: `sk-test- PLANTED...` reached the cache, index and git)."""
    import base64
    from urllib.parse import quote

    half = len(key) // 2
    raw = key.encode()
    return {
        "prefix and a space": key.replace("-", "- ", 2).replace("- ", "-", 1),
        "prefix and a tab": key[:8] + "\t" + key[8:],
        "split by a line break": key[:half] + "\n" + key[half:],
        "split by a zero-width space": key[:half] + "\u200b" + key[half:],
        "split into string literals": f'"{key[:half]}" + "{key[half:]}"',
        "percent-encoded": "".join(f"%{b:02x}" for b in raw),
        "percent-encoded, with a space": quote(key[:8] + " " + key[8:], safe=""),
        "base64": base64.b64encode(raw).decode(),
        "base64 inside a Basic credential": base64.b64encode(b"user:" + raw).decode(),
        "base64url after two bytes": base64.urlsafe_b64encode(b"ab" + raw + b"!").decode(),
    }


PLANTED_OPENAI_SHAPE = "sk-test-PLANTED" + "7f3a9c2e1b8d4a6f"


@pytest.mark.parametrize("variant", list(_variants(PLANTED_OPENAI_SHAPE)))
def test_a_variant_of_a_known_key_is_redacted_everywhere(variant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASFORGE_PLANTED_API_KEY", PLANTED_OPENAI_SHAPE)
    text = _variants(PLANTED_OPENAI_SHAPE)[variant]
    said = f"the key you sent was {text}, please check it"
    # redact_data scans the data as JSON text, where a line break is written \n and a quote \"
    for clean in (redact_secret_values(said), redact(said), redact_data({"answer": said})["answer"]):
        assert REDACTED in clean, (variant, clean)
        assert "PLANTED" not in clean and text not in clean, (variant, clean)
        assert clean.startswith("the key you sent was ") and clean.endswith(", please check it")


def test_the_parts_of_a_key_alone_and_ordinary_text_stay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASFORGE_PLANTED_API_KEY", PLANTED_OPENAI_SHAPE)
    for text in ("sk-test-", "PLANTED", "Think step by step. sk-test- is a prefix", "a + b, 'c' \"d\" %20 e"):
        assert redact_secret_values(text) == text


def test_key_variants_in_answers_reach_no_cache_index_git_nor_log(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-test-PLANTED" + uuid.uuid4().hex
    variants = list(_variants(key).values())
    monkeypatch.setenv("MASFORGE_ECHOED_CREDS", key)
    monkeypatch.setenv("MASFORGE_CACHE", str(tmp_path / "cache"))
    served = iter(range(10**6))

    def echo(messages: list[dict[str, object]], body: dict[str, object]) -> str:
        return f"Answer: {variants[next(served) % len(variants)]}"  # wrong answers: kept as failure notes

    with StubServer(responder=echo) as stub:
        config = {"task": TASK, "strategy": ["random"], "seeds": ["io", "cot"], "limit": 6, "test_limit": 2,
                  "test_top_k": 1, "budget": {"max_candidates": 3}, "meta_lm": "fake",
                  "lm": {"model": "openai/stub", "api_base": stub.api_base, "api_key_env": "MASFORGE_ECHOED_CREDS"}}
        (tmp_path / "run.yaml").write_text(json.dumps(config), encoding="utf-8")
        out = CliRunner().invoke(app, ["search", "--config", str(tmp_path / "run.yaml"), "-o",
                                       str(tmp_path / "runs")])
        assert out.exit_code == 0, out.output
        assert stub.requests >= len(variants)
    run_dir = (tmp_path / "runs" / "latest").resolve()
    (run_dir / "cli_output.txt").write_text(out.output, encoding="utf-8")
    cache = b"".join(p.read_bytes() for p in (tmp_path / "cache").rglob("lm_cache.sqlite*"))
    assert REDACTED.encode() in cache  # the answers were cached, redacted
    assert _assert_nowhere(run_dir, [key, *variants, "PLANTED"]) > 10
    assert _assert_nowhere(tmp_path / "cache", [key, *variants, "PLANTED"]) >= 1
