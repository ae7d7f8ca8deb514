"""The meta-agent's and co-evolution's prompt templates (``<name>.txt`` in this folder)."""

from masforge.prompt_templates import Templates

_SEARCH = Templates(__name__)
template = _SEARCH.template
render = _SEARCH.render
