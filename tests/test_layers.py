"""The layers of ARCHITECTURE.md hold: no module imports from a layer above its own.

Every import counts, including those inside functions and those made only for type checking: a
type-level dependency upward ties the lower layer's meaning to the upper one just the same. The
import graph is read from the source by :mod:`benchmarks.architecture`, which also counts the
cycles (none is allowed either).
"""

from __future__ import annotations

import pytest

from benchmarks.architecture import WITH_TYPES, cycles, import_graph

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "values",
        (
            "contextfold.messages",
            "contextfold.edits",
            "contextfold.tool_spec",
            "contextfold.token_counter",
            "contextfold.providers.types",
            "contextfold.models",
            "contextfold._exceptions",
            "contextfold._version",
            "contextfold._paths",
            "contextfold._blobs",
        ),
    ),
    (
        "text and tokens",
        (
            "contextfold.tokens",
            "contextfold._tokenizers",
            "contextfold._chat_template",
            "contextfold.estimator",
            "contextfold.redaction",
            "contextfold._secret_rules",
            "contextfold._private_files",
            "contextfold._truncate",
            "contextfold._graphemes",
            "contextfold._error_lines",
            "contextfold._placeholders",
            "contextfold._harness_notes",
            "contextfold.normalize",
            "contextfold._history_rules",
            "contextfold._bm25",
            "contextfold.budget",
            "contextfold.pins",
            "contextfold._digests",
            "contextfold._message_texts",
            "contextfold.config",
            "contextfold.events",  # its sinks write redacted, private files
        ),
    ),
    (
        "components",
        (
            "contextfold.outputs",
            "contextfold._blobstore",
            "contextfold._read_result",
            "contextfold.store",
            "contextfold.compaction",
            "contextfold.prompt",
            "contextfold.instructions",
            "contextfold.tools",
            "contextfold._tool_search",
            "contextfold._usage",
            "contextfold.providers",
            "contextfold.formats",
            "contextfold.ledger",
            "contextfold.loss",
        ),
    ),
    ("engine", ("contextfold.engine",)),
    (
        "applications",
        (
            "contextfold.agent",
            "contextfold.cli",
            "contextfold.integrations",
            "contextfold.proxy",
            "contextfold.replay",
            "contextfold",
        ),
    ),
)
"""Each layer and the modules (or packages) in it, from the bottom up."""


def layer_of(module: str) -> int | None:
    """The layer of ``module``: that of the longest name in :data:`LAYERS` it is or is inside."""
    best: tuple[int, int] | None = None
    for number, (_, names) in enumerate(LAYERS):
        for name in names:
            inside = module == name or module.startswith(name + ".")
            if inside and (best is None or len(name) > best[1]):
                best = (number, len(name))
    return best[0] if best else None


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(WITH_TYPES)


def test_every_module_has_a_layer(graph: dict[str, set[str]]) -> None:
    assert [module for module in graph if layer_of(module) is None] == []


def test_no_module_imports_from_a_layer_above_its_own(graph: dict[str, set[str]]) -> None:
    upward = []
    for module, imported in sorted(graph.items()):
        own = layer_of(module)
        for target in sorted(imported):
            target_layer = layer_of(target)
            if own is not None and target_layer is not None and target_layer > own:
                upward.append(
                    f"{module} ({LAYERS[own][0]}) imports {target} ({LAYERS[target_layer][0]})"
                )
    assert upward == []


def test_no_import_cycles(graph: dict[str, set[str]]) -> None:
    assert cycles(graph) == []


def test_no_module_of_the_engine_package_imports_the_engine_module(
    graph: dict[str, set[str]],
) -> None:
    importers = [
        module
        for module, imported in graph.items()
        if module.startswith("contextfold.engine.") and "contextfold.engine.engine" in imported
    ]
    assert importers == []
