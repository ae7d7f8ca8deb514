"""The input fields the runtime fills for an agent (a genome's signatures may name them)."""

MESSAGES_INPUT = "messages"
"""The input field through which an agent reads its agent predecessors' outputs."""
JUDGE_INPUT = "candidates"
"""The input field through which a judge reads the candidates."""
TOOL_ARG = "arg"
"""The one argument every tool takes (a string): the program, expression or query to run."""
