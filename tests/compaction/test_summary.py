"""Structured summaries: what the model reads, round trips, growth and caps."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.compaction import (
    SECTION_NAMES,
    ExtractiveSummarizer,
    StructuredSummary,
    SummaryCaps,
    SummaryItem,
)
from contextfold.compaction.summary import SectionName, summary_message
from contextfold.messages import Message, SummaryPart

from .conftest import tool_round


def _summary(**sections: list[str]) -> StructuredSummary:
    return StructuredSummary(
        {
            name.replace("_", " "): tuple(SummaryItem(t, ("m1",)) for t in items)
            for name, items in sections.items()
        }
    )


def test_render_shows_every_section_marked_as_a_summary_with_recovery_hint() -> None:
    text = _summary(Files_Modified=["src/a.py"]).render(("m0", "m9"))
    assert text.startswith("[Summary of the earlier conversation (messages m0 … m9).")
    assert "read_result" in text
    for name in SECTION_NAMES:
        assert f"## {name}" in text
    assert "- src/a.py [src: m1]" in text
    assert "## Failed Approaches\n(none)" in text


def test_round_trip_through_a_summary_part_is_exact() -> None:
    summary = StructuredSummary(
        {
            "Errors Encountered": (
                SummaryItem("KeyError: 'x' [in a.py]", ("m1", "m4"), ("ref_0123456789ab",)),
            )
        },
        {"Errors Encountered": 3},
    )
    part = summary.to_part(("m0", "m9"))
    message = summary_message(summary, ("m0", "m9"))
    assert message.meta.kind == "summary" and message.role == "user"
    back = StructuredSummary.from_part(Message.from_json(message.to_json()).parts[0])  # type: ignore[arg-type]
    assert back.items("Errors Encountered") == summary.items("Errors Encountered")
    assert back.omitted == {"Errors Encountered": 3}
    assert isinstance(part, SummaryPart) and part.covers == ("m0", "m9")


def test_model_markdown_parses_into_sections() -> None:
    reply = (
        "## Session Intent\n- Port the cache [src: u1]\n## Current Task\n- tests\n"
        "## Files Modified\n* src/cache.py: new LRU\n## Files Read (reference only)\n1. README.md\n"
        "## Key Decisions\n- (none)\n## Failed Approaches\n## Errors Encountered\n- KeyError: 'a'\n"
        "## Next Steps\n- run the tests"
    )
    summary = StructuredSummary.from_markdown(reply)
    assert summary.items("Session Intent") == (SummaryItem("Port the cache", ("u1",)),)
    assert [i.text for i in summary.items("Files Modified")] == ["src/cache.py: new LRU"]
    assert [i.text for i in summary.items("Files Read")] == ["README.md"]
    assert summary.items("Key Decisions") == ()


def test_extend_keeps_old_items_merges_duplicates_and_replaces_current_state() -> None:
    old = StructuredSummary(
        {
            "Files Modified": (SummaryItem("src/a.py", ("m1",)),),
            "Current Task": (SummaryItem("reading code", ("m1",)),),
            "Errors Encountered": (SummaryItem("KeyError: 'x'", ("m2",)),),
        }
    )
    new = StructuredSummary(
        {
            "Files Modified": (
                SummaryItem("src/a.py: second edit", ("m7",)),
                SummaryItem("src/b.py", ("m8",)),
            ),
            "Current Task": (SummaryItem("running tests", ("m9",)),),
        }
    )
    merged = old.extend(new)
    assert [(i.text, i.sources) for i in merged.items("Files Modified")] == [
        ("src/a.py: second edit", ("m1", "m7")),  # one entry, the latest description
        ("src/b.py", ("m8",)),
    ]
    assert [i.text for i in merged.items("Current Task")] == ["running tests"]
    assert [i.text for i in merged.items("Errors Encountered")] == ["KeyError: 'x'"]


def test_caps_keep_the_task_and_the_most_recent_items_and_say_how_many_went() -> None:
    intent = [f"intent {i}" for i in range(20)]
    files = [f"src/f{i}.py" for i in range(50)]
    capped = _summary(Session_Intent=intent, Files_Read=files).capped(
        SummaryCaps(per_section={"Session Intent": 3, "Files Read": 10})
    )
    assert [i.text for i in capped.items("Session Intent")] == [
        "intent 0",
        "intent 18",
        "intent 19",
    ]
    assert [i.text for i in capped.items("Files Read")] == files[-10:]
    assert "- … 40 earlier items" in capped.render()
    assert capped.omitted == {"Session Intent": 17, "Files Read": 40}


def test_total_cap_bounds_the_rendered_size() -> None:
    big = _summary(
        Session_Intent=["the task"] + [f"request {i} " + "r" * 200 for i in range(8)],
        Key_Decisions=[f"decision {i} " + "d" * 300 for i in range(12)],
        Errors_Encountered=[f"Error{i}: " + "e" * 250 for i in range(40)],
    )
    capped = big.capped(SummaryCaps(max_chars=4_000))
    assert len(capped.render()) <= 4_000
    assert capped.items("Session Intent")[0].text == "the task"


def test_no_growth_over_repeated_extensions() -> None:
    caps = SummaryCaps(max_chars=6_000)
    summary: StructuredSummary | None = None
    sizes = []
    for round_ in range(10):
        view = [Message.user("Keep the API stable.", id="u")]
        for n in range(20):
            k = round_ * 100 + n
            view += tool_round(
                k,
                f"sed -i 's/a/b/' src/mod{k}.py",
                f"<returncode>1</returncode>\n<output>\nValueError: case {k}\n</output>",
            )
        summary = ExtractiveSummarizer(caps).summarize(view, summary, None)
        sizes.append(len(summary.render()))
    assert max(sizes) <= 6_000
    assert summary is not None and summary.items("Session Intent")[0].text.startswith("Task:")
    # The newest facts are the ones kept.
    assert "ValueError: case 919" in summary.render()


def test_extractive_summary_cites_messages_and_refs() -> None:
    view = [Message.user("Fix the crash in app.py", id="u")]
    view += tool_round(0, "cat app.py", "print(1)")
    view += tool_round(
        1,
        "python app.py",
        "<returncode>1</returncode>\n<output>\nNameError: name 'x' is not defined\n</output>",
    )
    view += tool_round(
        2,
        "sed -i 's/x/1/' app.py",
        "<returncode>0</returncode>\n<output>\n</output>",
        text="I will use a constant instead of x because x is never set.",
    )
    view.append(Message.assistant("Fixed. Next I will run the full test suite.", id="end"))
    summary = ExtractiveSummarizer().summarize(view, None, "the crash")
    render = summary.render()
    assert "- Task: Fix the crash in app.py [src: u]" in render
    assert "- app.py [src: a2]" in render
    assert "NameError: name 'x' is not defined [src: t1]" in render
    assert "Focus requested: the crash" in render
    assert [i.text for i in summary.items("Next Steps")] == ["Next I will run the full test suite."]
    assert any("because x is never set" in i.text for i in summary.items("Key Decisions"))


# --------------------------------------------------------------------------------------------------
# Capping sheds the same items as rendering the whole summary after each one shed
# --------------------------------------------------------------------------------------------------


def _capped_by_rendering(summary: StructuredSummary, caps: SummaryCaps) -> StructuredSummary:
    """The cap as first written: the whole summary rendered again after each item shed."""
    once = StructuredSummary(summary.sections, summary.omitted).capped(
        SummaryCaps(caps.per_section, 10**9, caps.max_item_chars)
    )
    sections = {n: list(once.items(n)) for n in SECTION_NAMES}
    omitted = dict(once.omitted)
    result = StructuredSummary({k: tuple(v) for k, v in sections.items()}, dict(omitted))
    while len(result.render()) > caps.max_chars:
        candidates = [
            n for n in SECTION_NAMES if len(sections[n]) > (1 if n == "Session Intent" else 0)
        ]
        if not candidates:
            break
        name = max(candidates, key=lambda n: sum(len(i.render()) for i in sections[n]))
        kept = sections[name]
        sections[name] = [kept[0], *kept[2:]] if name == "Session Intent" else kept[1:]
        omitted[name] = omitted.get(name, 0) + 1
        result = StructuredSummary({k: tuple(v) for k, v in sections.items()}, dict(omitted))
    return result


_items = st.lists(
    st.builds(
        SummaryItem,
        st.text(st.characters(codec="utf-8"), max_size=120),
        st.lists(st.sampled_from(["m1", "m22", "m333"]), max_size=2).map(tuple),
        st.lists(st.sampled_from(["ref_0123456789ab"]), max_size=1).map(tuple),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(st.sampled_from(SECTION_NAMES), _items),
    st.dictionaries(st.sampled_from(SECTION_NAMES), st.integers(0, 12)),
    st.integers(200, 6_000),
)
def test_capping_sheds_what_rendering_after_each_item_would(
    sections: dict[SectionName, list[SummaryItem]],
    omitted: dict[SectionName, int],
    max_chars: int,
) -> None:
    summary = StructuredSummary({k: tuple(v) for k, v in sections.items()}, omitted)
    caps = SummaryCaps(max_chars=max_chars)
    capped = summary.capped(caps)
    expected = _capped_by_rendering(summary, caps)
    assert capped == expected
    assert capped.render() == expected.render()
