"""Error types. Every message is one line that names the problem and how to fix it."""

from __future__ import annotations

from masforge.redact import redact
from masforge.text import escape_controls


class MasforgeError(Exception):
    """Base class for errors shown to users as a single clear line (never a traceback).

    The message is made safe when the error is made: redacted (a provider's 401 body may quote the API key) and
    kept to one line (a value quoted from a file may hold line breaks; they are shown as ``\\n``, other control
    characters as ``\\xNN``), so it can be printed, stored and logged as it is."""

    def __init__(self, *args: object) -> None:
        if args and isinstance(args[0], str):
            message = redact(args[0])
            if "\n" in message or "\r" in message:
                message = message.strip().replace("\r", "\\r").replace("\n", "\\n")
            message = escape_controls(message)  # other line breaks (NEL, U+2028, ...) and control characters
            args = (message, *args[1:])
        super().__init__(*args)


class GenomeError(MasforgeError):
    """A genome file or object is malformed or fails validation."""


class ConfigError(MasforgeError):
    """A run configuration, LM alias or option is wrong or missing."""


class LocalModelError(MasforgeError):
    """The embedded local model (llama-cpp-python or its weights) is missing or failed."""


class SandboxError(MasforgeError):
    """The sandbox itself could not run (not: the untrusted code failed, which is a result)."""


class DataError(MasforgeError):
    """A data file is missing or broken; the message names the file and line."""


class TaskError(MasforgeError):
    """An unknown task name or a wrongly built task."""


class LMError(MasforgeError):
    """A language-model call failed for good (after the allowed retries).

    ``infrastructure`` is True when the provider is at fault (rate limits, server errors, timeouts, lost
    connections, malformed answers, missing access): an example that met such a failure is unscored, not
    wrong. False when the request itself was refused (e.g. a prompt longer than the context window)."""

    def __init__(self, message: str, *, infrastructure: bool = False) -> None:
        super().__init__(message)
        self.infrastructure = infrastructure


class BudgetExceeded(MasforgeError):
    """A budget limit (dollars, tokens, calls, wall time) was reached, or a search must stop for another reason
    (``outage``); `limit` names which."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit = limit


class RunHalted(BudgetExceeded):
    """The run cannot go on, whatever is left of its budget: the LM provider refuses it (a rejected key, an unknown
    model, a server that does not answer) or the sandbox it needs is missing. It stops the run at once, like a
    budget stop, and nothing it touched is stored as a score; the message names the cause and the fix."""


class ProviderError(RunHalted):
    """The LM provider refuses every request of this run: HTTP 401/403, an unknown model, a server that cannot be
    reached (``limit`` is ``provider``)."""

    def __init__(self, message: str) -> None:
        super().__init__("provider", message)


class SandboxUnavailable(RunHalted):
    """Generated code would run with weaker isolation than the user accepted (``limit`` is ``sandbox``)."""

    def __init__(self, message: str) -> None:
        super().__init__("sandbox", message)


def stop_error(limit: str, message: str) -> BudgetExceeded:
    """The stop ``limit`` as its exception type again (a stop sent between processes travels as text)."""
    if limit == "provider":
        return ProviderError(message)
    if limit == "sandbox":
        return SandboxUnavailable(message)
    return BudgetExceeded(limit, message)


class ArchiveError(MasforgeError):
    """A path is not an archive, an id is unknown or ambiguous, or the archive is damaged."""
