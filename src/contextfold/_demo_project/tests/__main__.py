"""Run the shopcart tests with the standard library: ``python -m tests [--verbose]``.

``--verbose`` names every test and prints the catalogue audit, one line per product.
"""

from __future__ import annotations

import io
import re
import sys
import unittest
from pathlib import Path

from shopcart import load_catalog

HERE = Path(__file__).resolve().parent


def audit_catalog() -> int:
    """Print one line per product; return how many look wrong."""
    problems = 0
    for product in load_catalog().values():
        ok = product.price > 0 and product.vat in (0, 5, 20) and product.name.strip() != ""
        problems += not ok
        gross = product.price + (product.price * product.vat + 50) // 100
        print(
            f"audit {product.sku}  {product.name:<22} net {product.price / 100:>7.2f}  "
            f"vat {product.vat:>2}%  gross {gross / 100:>7.2f}  {'ok' if ok else 'FAIL'}"
        )
    return problems


def main(argv: list[str]) -> int:
    verbose = "--verbose" in argv or "-v" in argv
    problems = audit_catalog() if verbose else 0
    suite = unittest.defaultTestLoader.discover(str(HERE), top_level_dir=str(HERE.parent))
    report = io.StringIO()
    result = unittest.TextTestRunner(stream=report, verbosity=2 if verbose else 1).run(suite)
    # Without the run's duration: the same tests print the same text on every run.
    sys.stdout.write(re.sub(r"(Ran \d+ tests?) in [\d.]+s", r"\1", report.getvalue()))
    return 0 if result.wasSuccessful() and not problems else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
