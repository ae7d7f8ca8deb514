"""The meta-agent's and co-evolution's prompt templates (``<name>.txt`` in this folder)."""

from masforge.runtime.prompts import Templates

_SEARCH = Templates(__name__)
template = _SEARCH.template
render = _SEARCH.render
