"""No import cycle in the package, at module level or inside a function: each tie runs one way.

A cycle hidden in a function-level import still couples both modules (neither can be read or changed alone)
and breaks when either is imported first in a new place; import-linter's layers cover the packages, this
covers every module.
"""

from __future__ import annotations

import grimp


def strongly_connected(graph: grimp.ImportGraph) -> list[list[str]]:
    """Tarjan's components of more than one module: each is a set of modules importing one another."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in order:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], order[imported])
        if low[module] == order[module]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in order:
            visit(module)
    return cycles


def test_no_module_of_the_package_imports_itself_back_through_others() -> None:
    graph = grimp.build_graph("agui_bridge")
    assert len(graph.modules) > 100, "the whole package was read"
    assert strongly_connected(graph) == []


def test_the_cycle_finder_reports_a_cycle_hidden_inside_a_function() -> None:
    graph = grimp.ImportGraph()
    for name in ("pkg", "pkg.a", "pkg.b", "pkg.c"):
        graph.add_module(name)
    graph.add_import(importer="pkg.a", imported="pkg.b", line_number=3, line_contents="import pkg.b")
    graph.add_import(importer="pkg.b", imported="pkg.a", line_number=9, line_contents="    from pkg import a")
    graph.add_import(importer="pkg.c", imported="pkg.a", line_number=1, line_contents="import pkg.a")
    assert strongly_connected(graph) == [["pkg.a", "pkg.b"]]
