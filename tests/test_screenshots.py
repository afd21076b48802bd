"""The terminal screenshots in docs/screenshots show what the build prints: each command runs
again in a tmux pane of the same width, and its text must match the screenshot's line for line
(dates, refs and figures compared by shape: the demo's session is made again for the test).
``python docs/screenshots.py`` redraws them."""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "docs" / "screenshots.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_screenshots", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


screenshots = _script()
CASES = [(shot, width) for shot in screenshots.SHOTS for width in screenshots.WIDTHS]


def _shape(text: str) -> list[str]:
    """The lines of ``text`` with trailing spaces, refs and numbers blanked."""
    blanked = re.sub(r"\d[\d,.]*", "N", re.sub(r"ref_[0-9a-f]{12}", "ref_X", text))
    return [line.rstrip() for line in blanked.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def demo_env() -> Iterator[dict[str, str]]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (Debian: apt-get install tmux)")
    with screenshots.demo_home() as env:
        yield env


@pytest.mark.parametrize(("shot", "width"), CASES, ids=[f"{s.name}-{w}" for s, w in CASES])
def test_a_screenshot_shows_what_the_build_prints(
    shot: object, width: int, demo_env: dict[str, str]
) -> None:
    picture = screenshots.path(shot, width)
    assert picture.exists(), f"{picture} is missing: python docs/screenshots.py"
    shown = screenshots.svg_text(picture.read_text(encoding="utf-8"))
    printed = screenshots.capture(shot, width, demo_env)
    assert _shape(shown) == _shape(printed), f"{picture.name} is stale: python docs/screenshots.py"
    assert max(len(line) for line in printed.splitlines()) <= width
    # The picture is drawn from its text exactly (the script's own rendering).
    assert picture.read_text(encoding="utf-8") == screenshots.svg(shown, width)


def test_the_readme_and_docs_show_the_screenshots() -> None:
    readme = (SCRIPT.parents[1] / "README.md").read_text(encoding="utf-8")
    for shot in screenshots.SHOTS:
        assert f"docs/screenshots/{shot.name}-80.svg" in readme
