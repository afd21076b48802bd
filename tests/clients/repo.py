"""A small generated repository for the clients to work on: a Python package with TODOs to
edit, a check script that tells whether the edits landed, and two large files (a CSV and a log)
whose reads and listings give the large outputs a real session has.

Generated rather than copied from the project, so the tests do not depend on where the demo
project lives in ``src/`` (which is being restructured), and every run starts from the same
bytes.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["CSV_LINES", "LOG_LINES", "edits_missing", "make_repo"]

CSV_LINES = 3_000
"""Rows of ``data/items.csv`` (~110 KB: over Claude Code's 30 KB inline output limit)."""
LOG_LINES = 4_000
"""Lines of ``logs/app.log`` (~210 KB)."""

STOCK = '''"""Stock levels."""

LIMIT = 100


def reorder_level(on_hand, threshold=20):
    """How many units to order so that the stock gets back to the threshold."""
    return 0  # TODO(cf-1)


def capped(quantity):
    return min(quantity, LIMIT)
'''

PRICING = '''"""Prices."""

TAX = 0.0  # TODO(cf-2)
DISCOUNT = 0  # TODO(cf-3)


def price_with_tax(price):
    return round(price * (1 + TAX) - DISCOUNT, 2)
'''

CHECK = '''"""Tells which edits landed (run from the repository root)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from inventory import pricing, stock  # noqa: E402

checks = {
    "edit-1": stock.reorder_level(5) == 15,
    "edit-2": pricing.TAX == 0.2,
    "limit": stock.LIMIT == 250,
}
if "--all" in sys.argv:
    checks["edit-3"] = pricing.DISCOUNT == 5
for name, ok in checks.items():
    print(name, "ok" if ok else "FAILED")
print("cf-all-ok" if all(checks.values()) else "cf-checks-FAILED")
'''


def make_repo(root: Path) -> Path:
    """Write the repository under ``root`` (made if absent) and return ``root``."""
    (root / "inventory").mkdir(parents=True, exist_ok=True)
    (root / "tests").mkdir(exist_ok=True)
    (root / "data").mkdir(exist_ok=True)
    (root / "logs").mkdir(exist_ok=True)
    (root / "README.md").write_text("# inventory\n\nStock and prices for the shop.\n")
    (root / "inventory" / "__init__.py").write_text('"""Inventory."""\n')
    (root / "inventory" / "stock.py").write_text(STOCK)
    (root / "inventory" / "pricing.py").write_text(PRICING)
    (root / "tests" / "check.py").write_text(CHECK)
    rows = ["sku,name,qty,price"]
    rows += [
        f"SKU{i:05d},item number {i},{(i * 7) % 50},{(i % 97) + 0.99:.2f}"
        for i in range(1, CSV_LINES)
    ]
    (root / "data" / "items.csv").write_text("\n".join(rows) + "\n")
    levels = ("INFO", "INFO", "INFO", "WARN", "INFO", "INFO", "INFO", "ERROR")
    log = [
        f"2026-01-01 12:{(i // 60) % 60:02d}:{i % 60:02d} {levels[i % len(levels)]} "
        f"request {i:04d} handled in {(i * 13) % 300} ms"
        for i in range(1, LOG_LINES + 1)
    ]
    (root / "logs" / "app.log").write_text("\n".join(log) + "\n")
    return root


def edits_missing(work: Path) -> str | None:
    """None when ``tests/check.py --all`` says every edit landed, else what it printed."""
    checked = subprocess.run(
        ["python3", "-B", "tests/check.py", "--all"],  # -B: see clean_env
        cwd=work,
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return None if "cf-all-ok" in checked.stdout else checked.stdout + checked.stderr
