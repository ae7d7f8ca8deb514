"""Fake-LM replies for tests of evaluation on a cluster: they travel to Ray worker processes (plain picklable
objects, importable there) and answer like ``--lm fake``, with a fault or a delay added."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from masforge.lm.fake import fake_reply


def _prompt(messages: Sequence[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content", "")) for m in messages)


class KillOnSecondCall:
    """Answers like the fake LM, but the second LM call of the example whose prompt contains ``trigger`` kills
    its own process with SIGKILL, once (marker files in ``folder`` remember it across processes): the first call
    was paid and cached, the example dies half done."""

    def __init__(self, folder: str | os.PathLike[str], trigger: str) -> None:
        self.folder = str(folder)
        self.trigger = trigger

    def __call__(self, messages: Sequence[dict[str, Any]], info: dict[str, Any] | None = None) -> str:
        if self.trigger in _prompt(messages):
            seen, killed = Path(self.folder) / "first-call", Path(self.folder) / "killed"
            if not seen.exists():
                seen.write_text(str(os.getpid()))
            elif not killed.exists():
                killed.write_text(str(os.getpid()))
                os.kill(os.getpid(), signal.SIGKILL)
        return fake_reply(messages, info or {})


class SlowFake:
    """The fake LM answering after ``delay_s`` (so work overlaps in time), noting each call's process id as a line
    of ``log`` when given."""

    def __init__(self, delay_s: float, log: str | os.PathLike[str] | None = None) -> None:
        self.delay_s = delay_s
        self.log = str(log) if log else None

    def __call__(self, messages: Sequence[dict[str, Any]], info: dict[str, Any] | None = None) -> str:
        time.sleep(self.delay_s)
        if self.log:
            with open(self.log, "a", encoding="utf-8") as fh:
                fh.write(f"{os.getpid()}\n")
        return fake_reply(messages, info or {})
