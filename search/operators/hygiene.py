"""Checks on what a meta-agent writes before it is paid for: names that say what a system does, and
instructions that stay general.

A small meta-agent names its designs after the task ("mbpp", "mbpp", "mbpp") and copies a validation
question into an agent's instructions ("counts lists within a list by converting each list to a tuple"),
which cannot transfer to other questions and leaks the search split into the design.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from masforge.genome.graph import answers_at_output
from masforge.genome.schema import Genome

_WORD = re.compile(r"[a-z0-9_]+")
_GENERIC = {"", "proposal", "system", "new", "new-system", "short-name", "name", "improved", "improved-system",
            "better", "better-system", "design", "agent", "agents", "multi-agent", "solver", "repaired", "unnamed",
            "meta-invent", "meta-mutate", "meta-crossover", "meta-rewrite", "meta-repair", "what-the-system-does"}
_MODULE_WORD = {"predict": "direct", "chain_of_thought": "cot", "react": "react", "program_of_thought": "pot",
                "refine": "refine", "execute": "check"}
# The format's own placeholder copied ("what-the-system-does, e.g. plan-then-solve"), or a sentence about the
# task ("the-system-correctly-completes-the-function-sort"): neither names a design.
_ECHO = re.compile(r"(^|-)(what-(the|this|a)-system|e-g|the-system|this-system)(-|$)")
MAX_NAME_WORDS = 6
NGRAM = 6
"""Words in a row that, shared with a task example (and not task boilerplate), count as copying it."""
SHORT_NGRAM = 4
"""Fewer words in a row also count when two of them are rare in the task (in at most a tenth of its examples)."""
# The proposal format's placeholder for an agent's instructions, copied as they are: an agent told "what this
# agent does" has no instructions at all (the 0.5B meta-agent did this; such proposals scored 0).
_PLACEHOLDER_INSTRUCTIONS = re.compile(r"^\W*(what|describe)\W+(this|the)\W+agent\W+(does|must do|should do)\W*$",
                                       re.IGNORECASE)
# A system's name in place of instructions ("chain-of-thoughtxio~76f123", seen in a swarm run): one token
# joined by -, _ or ~ tells the agent nothing.
_NAME_AS_INSTRUCTIONS = re.compile(r"^\S*[-_~]\S*$")


def placeholder_instructions(genome: Genome) -> str | None:
    """The id of an agent whose instructions are the proposal format's placeholder or a name, or None."""
    if genome.kind != "config":
        return None
    return next((a.id for a in genome.agents for text in [a.instructions.strip()]
                 if _PLACEHOLDER_INSTRUCTIONS.match(text) or _NAME_AS_INSTRUCTIONS.match(text)), None)


def slug(text: str, limit: int = 48) -> str:
    """Lower-case words joined by '-', at most ``limit`` characters."""
    words = re.findall(r"[a-z0-9]+", str(text).lower())
    out = "-".join(words)
    return out[:limit].rstrip("-")


def structural_name(genome: Genome) -> str:
    """A name made from what the system is: its agents' roles (or module kinds), copies, rounds and how the
    answer is chosen, e.g. ``planner-coder-critic``, ``solver-x5-vote``, ``mathematician-skeptic-judge-r2``."""
    if genome.kind == "code":
        defs = [d for d in re.findall(r"^def\s+(\w+)", genome.code or "", re.M) if d != "forward"]
        return slug("code " + " ".join(defs[:3] or ["program"]))
    topo = genome.topology
    judge = topo.judge if topo.aggregation == "judge" else None
    parts = []
    for agent in genome.agents:
        if agent.id == judge:
            continue
        word = slug(agent.role, 20) or _MODULE_WORD.get(agent.module, agent.module)
        parts.append(word + (f"-x{agent.copies}" if agent.copies > 1 else ""))
    parts = list(dict.fromkeys(parts))[:4]
    if topo.aggregation == "majority_vote" and answers_at_output(genome) > 1:
        parts.append("vote")
    elif topo.aggregation == "run_examples" and answers_at_output(genome) > 1:
        parts.append("tested")
    elif judge:
        parts.append("judge")
    if topo.rounds > 1:
        parts.append(f"r{topo.rounds}")
    return slug(" ".join(parts)) or "system"


def _false_claim(name: str, genome: Genome) -> bool:
    """The name claims structure the system does not have: the 0.5B meta-agent copies the format's example
    name "solver-x3-vote" onto a single chain of thought."""
    if genome.kind != "config":
        return False
    words = name.split("-")
    topo = genome.topology
    copies = {a.copies for a in genome.agents}
    for word in words:
        if (m := re.fullmatch(r"x(\d+)", word)) and int(m.group(1)) not in copies:
            return True
        if (m := re.fullmatch(r"r(\d+)", word)) and int(m.group(1)) != topo.rounds:
            return True
    if "vote" in words and not (topo.aggregation == "majority_vote" and answers_at_output(genome) > 1):
        return True
    if "tested" in words and not (topo.aggregation == "run_examples" and answers_at_output(genome) > 1):
        return True
    return "judge" in words and topo.aggregation != "judge"


def descriptive_name(name: str, genome: Genome, *, task_name: str = "", taken: Iterable[str] = ()) -> str:
    """``name`` if it says something about the system, else a structural name; never just the task's name."""
    own = slug(name)
    task_words = [w for w in re.findall(r"[a-z0-9]+", task_name.lower()) if len(w) > 2]
    for word in task_words:  # "mbpp-solver" says nothing the task name does not
        own = re.sub(rf"(^|-){re.escape(word)}(?=-|$)", "", own).strip("-")
    if (own in _GENERIC or len(own) < 3 or _ECHO.search(own) or own.count("-") >= MAX_NAME_WORDS
            or _false_claim(own, genome)):
        own = structural_name(genome)
    used = set(taken)
    if own in used:
        structural = structural_name(genome)
        own = structural if structural not in used and structural != own else f"{own}-{genome.short_id[:4]}"
    return own


def _words(text: str) -> list[str]:
    return _WORD.findall(str(text).lower())


def _grams(words: Sequence[str], n: int = NGRAM) -> set[tuple[str, ...]]:
    return {tuple(words[i: i + n]) for i in range(len(words) - n + 1)}


def copied_example(genome: Genome, examples: Sequence[str]) -> str | None:
    """The passage an agent's instructions (or role) copy from a task example, or None.

    Runs of :data:`NGRAM` words shared with an example count, unless they are the task's boilerplate (in
    at least half the examples, e.g. "write the complete python function in a code block"); so do runs of
    :data:`SHORT_NGRAM` words with two words rare in the task."""
    if genome.kind != "config" or len(examples) < 2:
        return None  # with one example, its boilerplate cannot be told from its content
    common = max(2, (len(examples) + 1) // 2)
    example_words = [_words(e) for e in examples]
    df = Counter(g for words in example_words for g in _grams(words))
    specific = {g for g, count in df.items() if count < common}
    # Shorter runs count when they carry the words of one problem: a paraphrase keeps those ("sort numbers
    # from smallest to largest"), where general instructions share only common words ("a list of integers").
    word_df = Counter(w for words in example_words for w in set(words))
    rare = {w for w, count in word_df.items() if count <= max(1, len(examples) // 10)}
    short_df = Counter(g for words in example_words for g in _grams(words, SHORT_NGRAM))
    short_specific = {g for g, count in short_df.items() if count < common and len(rare.intersection(g)) >= 2}
    for agent in genome.agents:
        words = _words(f"{agent.role} {agent.instructions}")
        covered = [False] * len(words)
        for n, grams in ((NGRAM, specific), (SHORT_NGRAM, short_specific)):
            for i in range(len(words) - n + 1):
                if tuple(words[i: i + n]) in grams:
                    covered[i: i + n] = [True] * n
        spans, start = [], None
        for i, flag in enumerate([*covered, False]):
            if flag and start is None:
                start = i
            elif not flag and start is not None:
                spans.append(words[start:i])
                start = None
        if spans:
            return " ".join(max(spans, key=len))  # the longest copied passage, to show the model
    return None
