"""What reaches a terminal: a rich console on which text from genomes and models is shown as it is and cannot
drive the terminal. Every printing layer uses it (the CLI's consoles, a search's progress)."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.errors import MarkupError
from rich.markup import escape
from rich.segment import Segment
from rich.text import Text

from masforge.text import escape_controls


class SafeConsole(Console):
    """A rich console on which text from genomes and models (names, answers) cannot break the output: a string
    whose brackets are not valid rich markup (a genome named ``[/x]``) is shown literally instead of raising, and
    control characters in any text it prints (an escape sequence in a name) are written escaped, on a terminal
    or piped. Only the console's own control codes (colours, cursor moves of live progress) reach the output."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        # Every print, table, panel and progress line ends up here as segments: text with a style (the colours
        # are added after this), or a control segment of rich's own.
        return super()._render_buffer(
            segment if segment.control else Segment(escape_controls(segment.text), segment.style)
            for segment in buffer)

    def render_str(self, text: str, **kwargs: object) -> Text:  # type: ignore[override]
        try:
            return super().render_str(text, **kwargs)  # type: ignore[arg-type]
        except MarkupError:
            return super().render_str(escape(text), **kwargs)  # type: ignore[arg-type]
