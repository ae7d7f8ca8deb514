"""llama.cpp's own server for the embedded model: which server runs, its command line, the concurrency it
allows, and (where a binary is built) that it serves the model with parallel slots through masforge."""

from __future__ import annotations

import stat
import threading
import time
from pathlib import Path

import pytest

from masforge.errors import LocalModelError
from masforge.lm.config import parse_lm
from masforge.local_model import LocalServer, default_threads, is_pulled, llama_cpp_version, llama_server


def _fake_binary(path: Path) -> Path:
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_without_a_built_server_masforge_runs_llama_cpp_python(tmp_path, monkeypatch):
    monkeypatch.delenv(llama_server.SERVER_ENV, raising=False)
    monkeypatch.setenv("MASFORGE_CACHE", str(tmp_path))
    assert llama_server.server_binary() is None
    assert parse_lm("local").max_concurrency == 1  # it answers one request at a time
    assert LocalServer("qwen", cache=tmp_path).command(tmp_path / "m.gguf", 1)[1:3] == ["-m", "llama_cpp.server"]


def test_a_built_server_is_found_and_raises_the_local_concurrency(tmp_path, monkeypatch):
    monkeypatch.delenv(llama_server.SERVER_ENV, raising=False)
    monkeypatch.delenv(llama_server.EXTERNAL_ENV, raising=False)
    monkeypatch.delenv(llama_server.SLOTS_ENV, raising=False)
    monkeypatch.setenv("MASFORGE_CACHE", str(tmp_path))
    built = llama_server.built_path("9.9.9")
    assert built == tmp_path / "bin" / "llama-server-9.9.9"
    monkeypatch.setattr(llama_server, "llama_cpp_version", lambda: "9.9.9")
    built.parent.mkdir(parents=True)
    _fake_binary(built)
    assert llama_server.server_binary() == built
    assert parse_lm("local").max_concurrency == llama_server.SLOTS
    monkeypatch.setenv(llama_server.SLOTS_ENV, "8")
    assert parse_lm("local").max_concurrency == 8
    monkeypatch.setenv(llama_server.SERVER_ENV, "off")
    assert llama_server.server_binary() is None and parse_lm("local").max_concurrency == 1


def test_a_bad_server_setting_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv(llama_server.SERVER_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(LocalModelError, match="no executable llama-server there.*build-server.*=off"):
        llama_server.server_binary()
    assert llama_server.local_slots() == 1  # parsing an LM never fails for it; starting the server says why


def test_native_command_line(tmp_path, monkeypatch):
    binary = _fake_binary(tmp_path / "llama-server")
    monkeypatch.delenv(llama_server.SLOTS_ENV, raising=False)
    monkeypatch.setenv(llama_server.SERVER_ENV, str(binary))
    cmd = LocalServer("qwen", cache=tmp_path).command(tmp_path / "m.gguf", 4321)
    assert cmd[0] == str(binary)
    args = dict(zip(cmd[1:-1:2], cmd[2:-1:2], strict=True))
    assert cmd[-1] == "--no-webui"
    assert args["--model"] == str(tmp_path / "m.gguf") and args["--alias"] == "qwen2.5-coder-0.5b-instruct"
    assert args["--port"] == "4321" and args["--host"] == "127.0.0.1"
    assert args["--parallel"] == str(llama_server.SLOTS)
    assert int(args["--ctx-size"]) == 4096 * llama_server.SLOTS  # each slot keeps the single server's context
    assert args["--threads"] == args["--threads-batch"] == str(default_threads())
    monkeypatch.setenv(llama_server.SLOTS_ENV, "6")
    args = dict(zip(*[iter(LocalServer("qwen", cache=tmp_path).command(tmp_path / "m.gguf", 4321)[1:-1])] * 2,
                    strict=True))
    assert args["--parallel"] == "6" and int(args["--ctx-size"]) == 4096 * 6


@pytest.mark.parametrize("raw", ["0", "many", "65", "-2"])
def test_a_bad_slot_count_is_one_line(monkeypatch, raw):
    monkeypatch.setenv(llama_server.SLOTS_ENV, raw)
    with pytest.raises(LocalModelError, match=f"MASFORGE_LOCAL_SLOTS={raw}: give a whole number of slots from 1"):
        llama_server.configured_slots()


def test_an_external_server_is_asked_its_slots(monkeypatch):
    """masforge sends a running llama.cpp server as many requests at once as it has slots (its /props says)."""
    import http.server
    import threading

    class Props(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the handler API)
            body = b'{"total_slots": 8}' if self.path == "/props" else b"{}"
            self.send_response(200 if self.path == "/props" else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Props)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setattr(llama_server, "_SERVED_SLOTS", {})
        monkeypatch.setenv(llama_server.EXTERNAL_ENV, f"http://127.0.0.1:{server.server_port}/v1")
        assert llama_server.local_slots() == 8
        assert parse_lm("local").max_concurrency == 8
    finally:
        server.shutdown()
    monkeypatch.setattr(llama_server, "_SERVED_SLOTS", {})
    monkeypatch.setenv(llama_server.EXTERNAL_ENV, "http://127.0.0.1:9/v1")  # nothing there: the started-server rule
    monkeypatch.setenv(llama_server.SERVER_ENV, "off")
    assert llama_server.local_slots() == 1


NATIVE = None
try:
    NATIVE = llama_server.server_binary()
except LocalModelError:
    pass


@pytest.mark.local_model
@pytest.mark.skipif(NATIVE is None, reason="no llama.cpp server built (`masforge models build-server`)")
@pytest.mark.skipif(not llama_cpp_version() or not is_pulled(), reason="needs llama-cpp-python and the model")
def test_native_server_answers_concurrent_requests_through_masforge(monkeypatch):
    """Four requests at once through masforge's LM client all get full answers from the slots."""
    from masforge.lm.client import LMClient

    client = LMClient({"worker": parse_lm("local")}, cache=False)
    answers: list[str] = []
    lock = threading.Lock()

    def ask(i: int) -> None:
        c = client.complete([{"role": "user", "content": f"What is {i} + {i}? Answer with the number only."}],
                            temperature=0.0, max_tokens=16)
        with lock:
            answers.append(c.text)

    start = time.monotonic()
    threads = [threading.Thread(target=ask, args=(i,)) for i in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert len(answers) == 4 and all(a.strip() for a in answers), answers
    assert sum(str(2 * i) in " ".join(answers) for i in range(1, 5)) >= 2  # a 0.5B model adds small numbers
    assert time.monotonic() - start < 300
