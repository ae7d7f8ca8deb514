"""Cycles in a directed graph given as node and edge lists: strongly connected components and whether one is
a cycle. A leaf module (no genome imports), so a genome's canonical hash can ask whether it has a cycle."""

from __future__ import annotations

from collections.abc import Iterable


def strongly_connected(nodes: list[str], edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """Tarjan's SCCs; each component keeps the order of ``nodes``."""
    adj: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b in edges:
        if a in adj and b in adj:
            adj[a].append(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    result: list[list[str]] = []
    counter = 0
    pos = {n: i for i, n in enumerate(nodes)}

    def visit(v: str) -> None:
        nonlocal counter
        # Iterative DFS (genomes are small, but a recursion limit is no way to fail).
        work = [(v, iter(adj[v]))]
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(adj[w])))
                    advanced = True
                    break
                if w in on_stack:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp: list[str] = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                result.append(sorted(comp, key=pos.__getitem__))

    for n in nodes:
        if n not in index:
            visit(n)
    return result


def is_cyclic(component: list[str], edges: Iterable[tuple[str, str]]) -> bool:
    """A component is cyclic if it has several nodes or a self-loop (pass ``edges`` as a set when calling this
    for many components: anything else is copied into one on every call)."""
    if len(component) > 1:
        return True
    pairs = edges if isinstance(edges, set | frozenset) else set(edges)
    return (component[0], component[0]) in pairs
