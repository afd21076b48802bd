"""The architecture holds: the import-linter contracts of ``pyproject.toml`` are kept.

``[tool.importlinter]`` declares the layers (each imports only from the layers below it), that a
private module (``_name``) is imported only from within its own package, and that the modules of
a package import each other without cycles. CI runs ``lint-imports`` as well; running it here
means a local ``pytest`` catches a broken contract too. Imports made only for type checking
count: a type-level dependency upward ties the lower layer's meaning to the upper one just the
same.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _lint_imports() -> str:
    found = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.skip("lint-imports is not installed (the dev extra brings import-linter)")
    return found


def test_the_import_contracts_are_kept() -> None:
    result = subprocess.run(
        [_lint_imports(), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_no_module_of_the_engine_package_imports_the_engine_module() -> None:
    # A Session is built from its dependencies alone; the engine module only assembles them.
    graph = grimp.build_graph("contextfold")
    importers = graph.find_modules_that_directly_import("contextfold.engine.engine")
    assert sorted(m for m in importers if m.startswith("contextfold.engine.")) == []
