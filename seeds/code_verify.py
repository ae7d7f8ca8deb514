"""
name: code-solve-verify
description: >
  A code genome in the ADAS style: one call drafts an answer with its reasoning, a second call checks it
  as a strict verifier, and a third call fixes the answer when the verifier objects.
source: Hu et al. 2024, "Automated Design of Agentic Systems" (code-defined agents)
inputs: [question]
outputs: [answer]
"""


def _final(text):
    for marker in ("FINAL ANSWER:", "Final answer:", "Answer:"):
        if marker in text:
            return text.rsplit(marker, 1)[1].strip()
    return text.strip()


def forward(inputs):
    question = inputs["question"]
    draft = llm(
        "Solve the task step by step, then end with a line 'FINAL ANSWER: <answer>'.\n\nTask: " + question,
        system="You are a careful problem solver.",
    )
    verdict = llm(
        "Task: " + question + "\n\nProposed solution:\n" + draft
        + "\n\nIs the final answer correct? Reply 'CORRECT' or explain the mistake.",
        system="You are a strict verifier.",
        temperature=0.0,
    )
    if verdict.strip().upper().startswith("CORRECT"):
        return {"answer": _final(draft)}
    fixed = llm(
        "Task: " + question + "\n\nA draft solution:\n" + draft + "\n\nA reviewer said:\n" + verdict
        + "\n\nWrite a corrected solution that ends with 'FINAL ANSWER: <answer>'.",
        system="You are a careful problem solver.",
    )
    return {"answer": _final(fixed)}
