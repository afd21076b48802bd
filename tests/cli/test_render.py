"""``printable``: text from users, models and stores shown on a terminal without being obeyed."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from contextfold.cli import _render
from contextfold.cli._render import printable, printable_text, unprintable_count

KEPT = {"\n", "\t", "\u200c", "\u200d"}  # layout, and the joiners emoji and scripts need


def acts_on_a_terminal(char: str) -> bool:
    """A character a terminal acts on, or one that hides or reorders text."""
    return char not in KEPT and unicodedata.category(char) in ("Cc", "Cf", "Cs", "Zl", "Zp")


def assigned(text: str) -> bool:
    """No character of ``text`` is new to this Python's Unicode database (the ``regex`` module
    printable uses may know a later Unicode version)."""
    return all(unicodedata.category(c) != "Cn" for c in text)


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("a\x1b[8mhidden", "a\\x1b[8mhidden"),  # conceal
        ("\x1b[1A\x1b[2Kok", "\\x1b[1A\\x1b[2Kok"),  # cursor up, erase the line
        ("\x1b]52;c;aGk=\x07", "\\x1b]52;c;aGk=\\x07"),  # OSC 52: write the clipboard
        ("\x1b]8;;http://x\x1b\\link", "\\x1b]8;;http://x\\x1b\\link"),  # OSC 8 hyperlink
        ("\x1bP+q\x1b\\", "\\x1bP+q\\x1b\\"),  # DCS
        ("\x9b2J", "\\x9b2J"),  # C1 CSI in one character
        ("safe\rrm -rf ~", "safe\\rrm -rf ~"),  # bare carriage return
        ("abc\x08\x08\x08xyz\x7f", "abc\\x08\\x08\\x08xyz\\x7f"),  # backspaces, DEL
        ("x = 1 \u202e// ,0 = y", "x = 1 \\u202e// ,0 = y"),  # bidi override
        ("run\U000e0073\U000e0068", "run\\U000e0073\\U000e0068"),  # invisible tag characters
        ("bytes \udc9b kept", "bytes \\udc9b kept"),  # a surrogate-escaped byte
        ("line 1\n\tline 2", "line 1\n\tline 2"),  # newline and tab are layout, kept
        ("café 👨‍👩‍👧 [bold]", "café 👨‍👩‍👧 [bold]"),  # ordinary text untouched
    ],
)
def test_control_characters_are_shown_as_escapes(raw: str, shown: str) -> None:
    assert printable(raw) == shown
    assert printable_text(raw).plain == shown


@given(st.text(alphabet=st.characters(codec="utf-8") | st.characters(categories=["Cs"])))
def test_nothing_a_terminal_acts_on_survives_and_escaping_twice_changes_nothing(
    text: str,
) -> None:
    assume(assigned(text))
    shown = printable(text)
    assert not [c for c in shown if acts_on_a_terminal(c)]
    assert printable(shown) == shown
    assert unprintable_count(text) == sum(1 for c in text if acts_on_a_terminal(c))
    if not unprintable_count(text):
        assert shown == text


def test_the_escapes_stand_out_in_rich_text() -> None:
    text = printable_text("ok\x1b[8m")
    assert [(text.plain[span.start : span.end], span.style) for span in text.spans] == [
        ("\\x1b", "reverse")
    ]


def test_every_console_shows_what_it_prints_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    table = _render.table("title")
    table.add_row("a\x1b[8mb")
    _render.console().print(table)
    _render.console().print("x\x1b[1A\x1b[2K :thumbs_up: [red]y[/red]")
    _render.error_console().print("e\x9b2J", markup=False)

    out, err = capsys.readouterr()
    assert "\x1b" not in out and "\x9b" not in err
    assert "a\\x1b[8mb" in out
    assert "x\\x1b[1A\\x1b[2K :thumbs_up: y" in out  # emoji codes are shown as written
    assert "e\\x9b2J" in err
