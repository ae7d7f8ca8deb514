"""
name: code-ensemble
description: >
  Self-consistency written as a code genome: forward() asks the model for three independent step-by-step
  solutions (llm(..., sample=i) gives each call its own sample index, so they differ even when cached),
  pulls the final answer out of each (the line after its marker, else its last line; a fenced code block there
  is taken whole, since a program is many lines), and returns the answer that most samples agree on after
  normalising case, spacing and number formatting; ties go to the earliest sample. It shows how an
  ensemble that a config genome expresses with copies and majority_vote looks as plain Python that a
  meta-agent can rewrite freely (more samples, weighted votes, a verifier for ties, ...).
source: >-
  Wang et al. 2022, "Self-Consistency Improves Chain of Thought Reasoning in Language Models", written in
  the code-genome style of Hu et al. 2024, "Automated Design of Agentic Systems" (ADAS)
inputs: [question]
outputs: [answer]
"""

import re

SAMPLES = 3
# A fenced block: a program is many lines, so a code answer is its last block whole, never one line of it.
FENCED = re.compile(r"```[\w+-]*[ \t]*\n.*?(?:```|$)", re.S)


def _final(text):
    for marker in ("FINAL ANSWER:", "Final answer:", "Answer:"):
        if marker in text:
            after = text.rsplit(marker, 1)[1].strip()
            blocks = FENCED.findall(after)
            if blocks:
                return blocks[-1].strip()
            if after:
                return after.splitlines()[0].strip()
    blocks = FENCED.findall(text)
    if blocks and text.rstrip().endswith(blocks[-1].rstrip()):  # the reply ends with its code
        return blocks[-1].strip()
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _normalise(answer):
    text = " ".join(answer.lower().split()).strip(" .!'\"`$")
    try:
        number = float(text.replace(",", ""))
    except ValueError:
        return text
    return str(int(number)) if number.is_integer() else str(number)


def forward(inputs):
    question = inputs["question"]
    prompt = (
        "Solve the task step by step, then end with a line 'FINAL ANSWER: <answer>' "
        "where <answer> is as short as possible.\n\nTask: " + question
    )
    answers = []
    for i in range(SAMPLES):
        reply = llm(prompt, system="You are a careful problem solver.", temperature=0.8, sample=i)
        answers.append(_final(reply))
    votes = {}
    for answer in answers:
        key = _normalise(answer)
        votes[key] = votes.get(key, 0) + 1
    best = max(votes, key=votes.get)
    winner = next(answer for answer in answers if _normalise(answer) == best)
    return {"answer": winner}
