"""The one cycle finder of the import-graph tests (Python modules: test_architecture.py; the web
extension's ES modules: test_web_modules.py)."""
from __future__ import annotations


def find_cycles(graph: dict) -> list[list]:
    """The cycles a depth-first search closes in ``graph`` (node -> the nodes it points to): one
    per back edge, each as the nodes along it with the first repeated at the end; empty if and
    only if the graph has no cycle. Nodes are visited in sorted order, so the answer is stable."""
    found, colour, stack = [], {}, []

    def visit(n):
        colour[n] = "grey"
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if colour.get(m) == "grey":
                found.append(stack[stack.index(m):] + [m])
            elif m not in colour:
                visit(m)
        stack.pop()
        colour[n] = "black"

    for n in sorted(graph):
        if n not in colour:
            visit(n)
    return found
