"""Tool deferral and tool_search: what the model is offered, and how it finds what was held back."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable, Sequence

import pytest

from contextfold.events import ComponentDegraded, Event, ToolsDeferred
from contextfold.tokens.counters import HeuristicCounter, TokenCounter
from contextfold.tools.bm25 import BM25Index, search_terms, split_words
from contextfold.tools.deferral import (
    COMPACT_CONTEXT_TOOL,
    READ_RESULT_TOOL,
    TOOL_SEARCH_TOOL,
    ToolDeferral,
    ToolSelection,
    ToolSpec,
    engine_tools,
)

COUNTER = HeuristicCounter()

# --------------------------------------------------------------------------------------------------
# A synthetic catalog of ~200 MCP tools, the way real servers describe them
# --------------------------------------------------------------------------------------------------

_SERVICES: dict[str, tuple[str, list[tuple[str, str, list[str]]]]] = {
    # service prefix -> (display name, [(object, what it is, parameter names)])
    "github": (
        "GitHub",
        [
            ("issue", "issue in a repository", ["owner", "repo", "title", "body", "labels"]),
            ("pull_request", "pull request", ["owner", "repo", "head", "base", "title"]),
            ("branch", "branch of a repository", ["owner", "repo", "branch", "from_branch"]),
            ("release", "release with its tag and notes", ["owner", "repo", "tag_name"]),
        ],
    ),
    "gitlab": (
        "GitLab",
        [
            ("issue", "issue in a project", ["project_id", "title", "description"]),
            ("merge_request", "merge request", ["project_id", "source_branch", "target_branch"]),
            ("pipeline", "CI pipeline", ["project_id", "ref"]),
        ],
    ),
    "slack": (
        "Slack",
        [
            ("channel", "channel of the workspace", ["channel_name", "is_private"]),
            ("user", "member of the workspace", ["user_id"]),
            ("reminder", "reminder for a user", ["text", "time"]),
        ],
    ),
    "jira": (
        "Jira",
        [
            ("issue", "issue (ticket) in a project", ["project_key", "summary", "issue_type"]),
            ("sprint", "sprint of a board", ["board_id", "name", "start_date"]),
            ("comment", "comment on an issue", ["issue_key", "body"]),
        ],
    ),
    "linear": (
        "Linear",
        [
            ("issue", "issue for a team", ["team_id", "title", "priority"]),
            ("project", "project with milestones", ["name", "lead_id"]),
            ("cycle", "cycle (iteration) of a team", ["team_id", "starts_at"]),
        ],
    ),
    "notion": (
        "Notion",
        [
            ("page", "page in a workspace", ["parent_id", "title", "content"]),
            ("database", "database with typed properties", ["parent_id", "properties"]),
            ("block", "content block of a page", ["block_id", "children"]),
        ],
    ),
    "gdrive": (
        "Google Drive",
        [
            ("file", "file stored in Drive", ["file_id", "name", "mime_type"]),
            ("folder", "folder in Drive", ["folder_id", "name"]),
            ("permission", "sharing permission on a file", ["file_id", "role", "email"]),
        ],
    ),
    "gmail": (
        "Gmail",
        [
            ("draft", "email draft", ["to", "subject", "body"]),
            ("label", "mail label", ["label_name", "color"]),
            ("filter", "mail filter rule", ["criteria", "action"]),
        ],
    ),
    "calendar": (
        "Google Calendar",
        [
            ("event", "calendar event or meeting", ["calendar_id", "start", "end", "attendees"]),
            ("calendar", "secondary calendar", ["summary", "time_zone"]),
        ],
    ),
    "postgres": (
        "PostgreSQL",
        [
            ("table", "table of the database", ["schema", "table_name", "columns"]),
            ("index", "index on a table", ["table_name", "columns", "unique"]),
            ("role", "database role", ["role_name", "login"]),
        ],
    ),
    "sentry": (
        "Sentry",
        [
            ("alert_rule", "alert rule", ["project_slug", "conditions"]),
            ("release", "release for error tracking", ["version", "projects"]),
        ],
    ),
    "stripe": (
        "Stripe",
        [
            ("customer", "customer of the account", ["email", "name"]),
            ("invoice", "invoice for a customer", ["customer_id", "items"]),
            ("subscription", "subscription of a customer to a price", ["customer_id", "price"]),
        ],
    ),
    "s3": (
        "Amazon S3",
        [
            ("bucket", "storage bucket", ["bucket_name", "region"]),
            ("lifecycle_rule", "lifecycle rule of a bucket", ["bucket_name", "days"]),
        ],
    ),
    "kubernetes": (
        "Kubernetes",
        [
            ("deployment", "deployment in a namespace", ["namespace", "name", "replicas"]),
            ("service", "service exposing pods", ["namespace", "name", "ports"]),
            ("config_map", "config map", ["namespace", "name", "data"]),
        ],
    ),
    "docker": (
        "Docker",
        [
            ("container", "container on the host", ["container_id", "image"]),
            ("image", "container image", ["image", "tag"]),
            ("volume", "named volume", ["volume_name", "driver"]),
        ],
    ),
    "figma": (
        "Figma",
        [
            ("comment", "comment on a design file", ["file_key", "message"]),
            ("component", "component of a design library", ["file_key", "node_id"]),
        ],
    ),
    "confluence": (
        "Confluence",
        [
            ("page", "wiki page in a space", ["space_key", "title", "body"]),
            ("space", "space of the wiki", ["space_key", "name"]),
        ],
    ),
}

_VERBS = {
    "create": "Create a new {what} in {service}.",
    "get": "Get one {what} in {service} by its id, with all its fields.",
    "list": "List each {what} in {service}, with paging and filters.",
    "update": "Update the fields of an existing {what} in {service}.",
    "delete": "Delete a {what} from {service}. This cannot be undone.",
}

_SPECIAL = [
    ("slack_post_message", "Post a message to a Slack channel or thread.", ["channel", "text"]),
    ("slack_search_messages", "Search messages across Slack channels.", ["query", "count"]),
    ("slack_add_reaction", "Add an emoji reaction to a Slack message.", ["channel", "emoji"]),
    (
        "jira_transition_issue",
        "Move a Jira issue to another status in its workflow, e.g. In Progress to Done.",
        ["issue_key", "transition_id"],
    ),
    ("jira_search_issues", "Search Jira issues with a JQL query.", ["jql", "max_results"]),
    ("github_merge_pull_request", "Merge a GitHub pull request.", ["owner", "repo", "number"]),
    ("github_search_code", "Search code across GitHub repositories.", ["query"]),
    ("postgres_query", "Run a read-only SQL query on the PostgreSQL database.", ["sql"]),
    ("postgres_explain", "Show the execution plan of a SQL query in PostgreSQL.", ["sql"]),
    ("s3_put_object", "Upload a file (object) to an Amazon S3 bucket.", ["bucket", "key", "body"]),
    ("s3_get_object", "Download an object from an Amazon S3 bucket.", ["bucket", "key"]),
    ("gmail_send_email", "Send an email from the user's Gmail account.", ["to", "subject", "body"]),
    ("gmail_search_messages", "Search emails in the Gmail mailbox.", ["query", "max_results"]),
    (
        "calendar_find_free_time",
        "Find free time slots shared by several attendees in Google Calendar.",
        ["attendees", "duration_minutes"],
    ),
    ("stripe_create_refund", "Refund a Stripe payment (charge), fully or partly.", ["charge"]),
    (
        "kubernetes_restart_deployment",
        "Restart the pods of a Kubernetes deployment (rolling restart).",
        ["namespace", "name"],
    ),
    ("kubernetes_get_pod_logs", "Read the logs of a Kubernetes pod.", ["namespace", "pod"]),
    ("docker_exec", "Run a command inside a running Docker container.", ["container_id", "cmd"]),
    ("sentry_resolve_issue", "Mark a Sentry error issue as resolved.", ["issue_id"]),
    ("notion_search", "Search pages and databases in Notion by title.", ["query"]),
]


def _tool(name: str, description: str, params: Sequence[str], source: str = "mcp") -> ToolSpec:
    schema = {
        "type": "object",
        "properties": {p: {"type": "string", "description": p.replace("_", " ")} for p in params},
        "required": list(params[:1]),
    }
    return ToolSpec(name, description, schema, source)  # type: ignore[arg-type]


def mcp_catalog() -> list[ToolSpec]:
    """About 200 MCP tools from 17 services."""
    tools = [_tool(*special) for special in _SPECIAL]
    for service, (display, objects) in _SERVICES.items():
        for obj, what, params in objects:
            for verb, template in _VERBS.items():
                description = template.format(what=what, service=display)
                tools.append(_tool(f"{service}_{verb}_{obj}", description, params))
    return tools


BUILTINS = [
    _tool("read_file", "Read a file of the workspace.", ["path", "offset"], "builtin"),
    _tool(
        "edit_file", "Replace text in a file of the workspace.", ["path", "old", "new"], "builtin"
    ),
    _tool("shell", "Run a shell command in the workspace.", ["command"], "builtin"),
    *engine_tools(deferred=False),
]


def names(tools: Iterable[ToolSpec]) -> list[str]:
    return [t.name for t in tools]


def window_for(tools: Sequence[ToolSpec], counter: TokenCounter = COUNTER) -> int:
    """The effective window whose 10 % budget is exactly what ``tools`` take."""
    return math.ceil(counter.count_tools(tools) / 0.10)


# --------------------------------------------------------------------------------------------------
# Deferral
# --------------------------------------------------------------------------------------------------


def test_nothing_is_deferred_when_everything_fits() -> None:
    tools = [*BUILTINS, *mcp_catalog()[:5]]
    selection = ToolDeferral().select(tools, counter=COUNTER, effective_window=200_000)
    assert selection.active == tuple(tools)
    assert selection.deferred == ()
    assert selection.note is None
    assert selection.event() is None
    assert TOOL_SEARCH_TOOL not in selection.active
    assert selection.description_tokens == COUNTER.count_tools(tools)
    assert selection.budget_tokens == 20_000


def test_descriptions_stay_within_the_budget() -> None:
    catalog = mcp_catalog()
    assert len(catalog) >= 190
    tools = [*BUILTINS, *catalog]
    selection = ToolDeferral().select(tools, counter=COUNTER, effective_window=128_000)
    assert selection.budget_tokens == 12_800
    assert COUNTER.count_tools(tools) > selection.budget_tokens  # the catalog does not fit
    assert selection.description_tokens == COUNTER.count_tools(selection.active)
    assert selection.description_tokens <= selection.budget_tokens
    assert selection.deferred  # something had to go ...
    assert len(selection.active) > len(BUILTINS) + 1  # ... but the budget is used, not wasted
    assert selection.active[-1] == TOOL_SEARCH_TOOL
    assert sorted(names(selection.active[:-1]) + names(selection.deferred)) == sorted(names(tools))


def test_the_budget_is_nearly_filled() -> None:
    tools = [*BUILTINS, *mcp_catalog()]
    selection = ToolDeferral().select(tools, counter=COUNTER, effective_window=128_000)
    # the next tool in line would not have fitted
    first_deferred_cost = min(COUNTER.count_tools([t]) for t in selection.deferred)
    assert selection.description_tokens + first_deferred_cost > selection.budget_tokens - 200


def test_builtin_and_engine_tools_are_never_deferred() -> None:
    skills = [_tool(f"skill_{i}", "A skill.", ["x"], "skill") for i in range(3)]
    tools = [*BUILTINS, *skills, *mcp_catalog()[:10]]
    # a window so small that the built-ins alone are over budget
    selection = ToolDeferral().select(tools, counter=COUNTER, effective_window=100)
    assert names(selection.active) == [*names(BUILTINS), "tool_search"]
    assert len(selection.deferred) == 13
    assert selection.description_tokens > selection.budget_tokens  # honest about the overrun


def test_mcp_tools_are_deferred_before_skills() -> None:
    skills = [
        _tool(f"skill_{w}", f"Skill for {w} work.", ["input"], "skill")
        for w in ("pdf", "xlsx", "docx", "pptx", "charts")
    ]
    mcp = mcp_catalog()[:40]
    tools = [*mcp[:20], *skills, *mcp[20:]]
    base = [*[t for t in tools if t.source == "skill"], TOOL_SEARCH_TOOL]
    selection = ToolDeferral().select(
        tools, counter=COUNTER, effective_window=window_for(base) + 10
    )
    assert names(selection.active) == names(base)  # every skill kept, every MCP tool deferred
    assert selection.deferred == tuple(mcp)

    # With less room, skills go too, but never while an MCP tool stays.
    for window in range(100, window_for(tools), 400):
        selection = ToolDeferral().select(tools, counter=COUNTER, effective_window=window)
        if any(t.source == "skill" for t in selection.deferred):
            assert not any(t.source == "mcp" for t in selection.active)


def _same_cost_tools() -> list[ToolSpec]:
    # same description and schema: costs differ only by the name, so the order decides
    words = ["delta", "alpha", "charlie", "bravo", "echo", "golf", "hotel", "india", "kilo", "lima"]
    return [_tool(n, "Does a thing.", ["x"]) for n in words]


def test_least_recently_used_tools_are_deferred_first() -> None:
    tools = _same_cost_tools()
    deferral = ToolDeferral(budget_share=1.0)
    for name in ("bravo", "delta", "charlie"):  # charlie most recent, then delta, then bravo
        deferral.mark_used(name)
    by_name = {t.name: t for t in tools}
    window = COUNTER.count_tools([by_name["delta"], by_name["charlie"], TOOL_SEARCH_TOOL])
    selection = deferral.select(tools, counter=COUNTER, effective_window=window)
    assert names(selection.active) == ["delta", "charlie", "tool_search"]  # caller's order
    assert "bravo" in selection.deferred_names  # used, but longest ago

    deferral.mark_used("delta")  # delta is now the most recent, charlie next: same set
    assert deferral.select(tools, counter=COUNTER, effective_window=window) == selection
    deferral.mark_used("echo")  # echo, delta most recent: charlie (older) gives way
    window = COUNTER.count_tools([by_name["delta"], by_name["echo"], TOOL_SEARCH_TOOL])
    selection = deferral.select(tools, counter=COUNTER, effective_window=window)
    assert names(selection.active) == ["delta", "echo", "tool_search"]


def test_unused_tools_tie_by_name() -> None:
    tools = _same_cost_tools()
    window = COUNTER.count_tools([tools[0], TOOL_SEARCH_TOOL])
    selection = ToolDeferral(budget_share=1.0).select(
        tools, counter=COUNTER, effective_window=window
    )
    assert names(selection.active) == ["alpha", "tool_search"]


def test_selection_is_deterministic_and_keeps_the_callers_order() -> None:
    tools = [*BUILTINS, *mcp_catalog()]
    first = ToolDeferral().select(tools, counter=COUNTER, effective_window=128_000)
    again = ToolDeferral().select(tools, counter=COUNTER, effective_window=128_000)
    assert first == again

    shuffled = tools[:]
    random.Random(7).shuffle(shuffled)
    other = ToolDeferral().select(shuffled, counter=COUNTER, effective_window=128_000)
    assert set(names(other.active)) == set(names(first.active))  # same choice ...
    kept = set(names(first.active))
    assert names(other.active) == [t.name for t in shuffled if t.name in kept] + ["tool_search"]


def test_the_tool_list_is_stable_from_turn_to_turn() -> None:
    tools = [*BUILTINS, *mcp_catalog()]
    deferral = ToolDeferral()
    first = deferral.select(tools, counter=COUNTER, effective_window=128_000)
    for _ in range(3):  # turns where the model only uses built-ins
        deferral.mark_used("shell")
        deferral.mark_used("read_file")
        deferral.end_turn()
        assert deferral.select(tools, counter=COUNTER, effective_window=128_000) == first


def test_searched_tools_stay_active_until_the_turn_ends() -> None:
    tools = [*BUILTINS, *mcp_catalog()]
    deferral = ToolDeferral()
    before = deferral.select(tools, counter=COUNTER, effective_window=64_000)
    assert "jira_transition_issue" in before.deferred_names

    result = deferral.tool_search({"query": "move jira ticket to done"}, call_id="c1")
    assert (result.call_id, result.name, result.is_error) == ("c1", "tool_search", False)
    assert "jira_transition_issue" in deferral.activated
    during = deferral.select(tools, counter=COUNTER, effective_window=64_000)
    assert "jira_transition_issue" in names(during.active)
    assert "jira_transition_issue" not in during.deferred_names
    # a later search in the same turn still finds it
    assert names(deferral.search("jira transition", limit=1)) == ["jira_transition_issue"]

    deferral.end_turn()
    after = deferral.select(tools, counter=COUNTER, effective_window=64_000)
    assert after == before  # not used: deferred again


def test_a_found_tool_that_was_used_stays_after_the_turn() -> None:
    tools = [*BUILTINS, *mcp_catalog()]
    deferral = ToolDeferral()
    deferral.select(tools, counter=COUNTER, effective_window=64_000)
    deferral.tool_search({"query": "refund a stripe payment"})
    deferral.mark_used("stripe_create_refund")
    deferral.end_turn()
    after = deferral.select(tools, counter=COUNTER, effective_window=64_000)
    assert "stripe_create_refund" in names(after.active)


def test_activated_argument_keeps_tools_for_one_call() -> None:
    tools = [*BUILTINS, *mcp_catalog()]
    deferral = ToolDeferral()
    selection = deferral.select(
        tools, counter=COUNTER, effective_window=30_000, activated=["docker_exec"]
    )
    assert "docker_exec" in names(selection.active)
    assert (
        "docker_exec" not in deferral.select(tools, counter=COUNTER, effective_window=30_000).active
    )


def test_note_tells_the_model_how_many_and_what_to_call() -> None:
    tools = [*BUILTINS, *mcp_catalog()]
    selection = ToolDeferral().select(tools, counter=COUNTER, effective_window=64_000)
    count = len(selection.deferred)
    assert selection.note == (
        f"[{count} tools deferred to save context; call tool_search with a few words about "
        "what you need to load them]"
    )
    small = _same_cost_tools()
    big = _tool("zulu", "A long description. " * 100, ["x"])  # costs more than tool_search
    one = ToolDeferral(budget_share=1.0).select(
        [*small, big],
        counter=COUNTER,
        effective_window=COUNTER.count_tools([*small, TOOL_SEARCH_TOOL]),
    )
    assert one.deferred_names == ("zulu",)
    assert one.note is not None and one.note.startswith("[1 tool deferred")


def test_event_reports_what_was_deferred() -> None:
    tools = [*BUILTINS, *mcp_catalog()]
    selection = ToolDeferral().select(tools, counter=COUNTER, effective_window=64_000)
    event = selection.event("s1")
    assert isinstance(event, ToolsDeferred)
    assert event.session_id == "s1"
    assert event.count == len(selection.deferred)
    assert event.names == selection.deferred_names
    assert (event.description_tokens, event.budget_tokens) == (
        selection.description_tokens,
        6_400,
    )


def test_budget_share_must_be_a_share() -> None:
    with pytest.raises(ValueError, match="budget_share"):
        ToolDeferral(budget_share=10)


# --------------------------------------------------------------------------------------------------
# Odd input never breaks selection
# --------------------------------------------------------------------------------------------------


def test_unserializable_schema_is_tolerated() -> None:
    odd = ToolSpec("odd_tool", "Has a set in its schema.", {"enum": {1, 2}, "x": object()}, "mcp")
    no_schema = ToolSpec("bare_tool", "Schema is None.", None, "mcp")  # type: ignore[arg-type]
    tools = [*BUILTINS, odd, no_schema, *mcp_catalog()]
    deferral = ToolDeferral()
    selection = deferral.select(tools, counter=COUNTER, effective_window=100)
    assert selection.fallback_reason is None
    assert {"odd_tool", "bare_tool"} <= set(selection.deferred_names)
    result = deferral.tool_search({"query": "odd set schema"})
    assert "## odd_tool" in result.content


class _BrokenCounter(HeuristicCounter):
    def count_tools(self, tools: Iterable[ToolSpec]) -> int:
        raise RuntimeError("tokenizer unavailable")

    def count_text(self, text: str) -> int:
        raise RuntimeError("tokenizer unavailable")


def test_a_failing_counter_falls_back_to_every_tool_or_estimates() -> None:
    tools = [*BUILTINS, *mcp_catalog()]
    selection = ToolDeferral().select(tools, counter=_BrokenCounter(), effective_window=64_000)
    # estimates from the text length still keep the request within reach
    assert selection.deferred
    assert selection.fallback_reason is None


def test_input_that_is_not_a_tool_list_falls_back_to_all_tools() -> None:
    selection = ToolDeferral().select(
        [*BUILTINS, 42],  # type: ignore[list-item]
        counter=COUNTER,
        effective_window="lots",  # type: ignore[arg-type]
    )
    assert selection.fallback_reason is not None
    assert selection.active == (*BUILTINS, 42)
    assert selection.deferred == ()
    assert selection.note is None


# --------------------------------------------------------------------------------------------------
# Failures are reported once, by the deferral itself
# --------------------------------------------------------------------------------------------------


def _reporting_deferral() -> tuple[ToolDeferral, list[Event]]:
    events: list[Event] = []
    return ToolDeferral(session_id="s1", on_event=events.append), events


def test_a_failing_selection_sends_every_tool_and_reports_it_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: object, **kwargs: object) -> ToolSelection:
        raise RuntimeError("deferral bug")

    deferral, events = _reporting_deferral()
    monkeypatch.setattr(deferral, "_select", broken)
    tools = [*BUILTINS, *mcp_catalog()]
    selection = deferral.select(tools, counter=COUNTER, effective_window=64_000)

    assert selection.active == tuple(tools) and selection.deferred == ()
    assert selection.fallback_reason == "RuntimeError: deferral bug"
    assert events == [
        ComponentDegraded(
            session_id="s1",
            component="tool_deferral",
            fallback="all tools sent",
            error="RuntimeError: deferral bug",
            at=events[0].at,
        )
    ]


def test_input_that_is_not_a_tool_list_is_reported_as_the_deferral_failing() -> None:
    deferral, events = _reporting_deferral()
    deferral.select(
        [*BUILTINS, 42],  # type: ignore[list-item]
        counter=COUNTER,
        effective_window="lots",  # type: ignore[arg-type]
    )
    assert [(e.component, e.fallback) for e in events if isinstance(e, ComponentDegraded)] == [
        ("tool_deferral", "all tools sent")
    ]


def test_a_failing_counter_is_reported_once_per_counter() -> None:
    deferral, events = _reporting_deferral()
    tools = [*BUILTINS, *mcp_catalog()]
    broken = _BrokenCounter()
    for _ in range(3):
        selection = deferral.select(tools, counter=broken, effective_window=64_000)
        assert selection.deferred and selection.fallback_reason is None
    assert [(e.component, e.error) for e in events if isinstance(e, ComponentDegraded)] == [
        ("token_counter", "RuntimeError: tokenizer unavailable")
    ]
    deferral.select(tools, counter=_BrokenCounter(), effective_window=64_000)  # another counter
    assert len(events) == 2


def test_an_unserializable_schema_is_no_failure() -> None:
    deferral, events = _reporting_deferral()
    odd = ToolSpec("odd_tool", "Has a set in its schema.", {"enum": {1, 2}}, "mcp")
    selection = deferral.select(
        [*BUILTINS, odd, *mcp_catalog()], counter=COUNTER, effective_window=100
    )
    assert "odd_tool" in selection.deferred_names
    assert events == []


# --------------------------------------------------------------------------------------------------
# tool_search
# --------------------------------------------------------------------------------------------------


@pytest.fixture
def all_deferred() -> ToolDeferral:
    """A deferral where every catalog tool is deferred (a tiny window)."""
    deferral = ToolDeferral()
    selection = deferral.select([*BUILTINS, *mcp_catalog()], counter=COUNTER, effective_window=10)
    assert len(selection.deferred) == len(mcp_catalog())
    return deferral


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("create github issue", "github_create_issue"),
        ("open a new issue on GitHub", "github_create_issue"),
        ("post a message to a slack channel", "slack_post_message"),
        ("move jira ticket to done", "jira_transition_issue"),
        ("search jira issues with jql", "jira_search_issues"),
        ("list open pull requests", "github_list_pull_request"),
        ("merge the pull request", "github_merge_pull_request"),
        ("run a sql query on the database", "postgres_query"),
        ("upload a file to s3", "s3_put_object"),
        ("search my emails", "gmail_search_messages"),
        ("send an email", "gmail_send_email"),
        ("schedule a meeting on google calendar", "calendar_create_event"),
        ("find a free time slot for the attendees", "calendar_find_free_time"),
        ("refund a stripe payment", "stripe_create_refund"),
        ("restart kubernetes deployment", "kubernetes_restart_deployment"),
        ("read pod logs", "kubernetes_get_pod_logs"),
        ("run a command in a docker container", "docker_exec"),
        ("delete a gitlab merge request", "gitlab_delete_merge_request"),
        ("share a drive file with someone by email", "gdrive_create_permission"),
        ("notion_update_page", "notion_update_page"),
        ("NotionUpdatePage", "notion_update_page"),
        ("resolve sentry error", "sentry_resolve_issue"),
    ],
)
def test_tool_search_ranks_the_right_tool_first(
    all_deferred: ToolDeferral, query: str, expected: str
) -> None:
    assert names(all_deferred.search(query, limit=3))[0] == expected


def test_exact_names_come_first(all_deferred: ToolDeferral) -> None:
    found = all_deferred.search("slack_post_message, jira_create_issue", limit=5)
    assert names(found)[:2] == ["slack_post_message", "jira_create_issue"]


def test_tool_search_result_shows_name_description_and_schema(all_deferred: ToolDeferral) -> None:
    result = all_deferred.tool_search({"query": "post slack message", "limit": 2}, call_id="c7")
    assert not result.is_error
    assert result.content.count("\n## ") == 2
    assert "## slack_post_message\nPost a message to a Slack channel or thread." in result.content
    schema = json.dumps(
        next(t for t in mcp_catalog() if t.name == "slack_post_message").parameters,
        separators=(",", ":"),
    )
    assert f"parameters: {schema}" in result.content
    assert "slack_post_message" in all_deferred.activated


def test_tool_search_caps_its_answer(all_deferred: ToolDeferral) -> None:
    result = all_deferred.tool_search({"query": "create", "limit": 500})
    assert result.content.count("\n## ") == 10
    default = all_deferred.tool_search({"query": "create"})
    assert default.content.count("\n## ") == 5
    long_tool = _tool("huge_tool", "word " * 2_000, [f"p{i}" for i in range(400)])
    deferral = ToolDeferral()
    deferral.select([long_tool], counter=COUNTER, effective_window=10)
    assert len(deferral.tool_search({"query": "huge"}).content) < 2_500


def test_empty_query_is_an_error_that_lists_names(all_deferred: ToolDeferral) -> None:
    result = all_deferred.tool_search({"query": "  "})
    assert result.is_error
    assert "needs a query" in result.content
    # ~200 names would flood the window: their families are listed instead
    assert f"The {len(mcp_catalog())} deferred tools by name: slack_* (18), jira_* (17)" in (
        result.content
    )
    assert not all_deferred.activated


def test_no_match_suggests_names(all_deferred: ToolDeferral) -> None:
    result = all_deferred.tool_search({"query": "xylophone quantum"})
    assert not result.is_error
    assert 'No deferred tool matches "xylophone quantum"' in result.content
    assert "slack_* (18)" in result.content
    assert not all_deferred.activated

    few = ToolDeferral()
    few.select([*BUILTINS, *mcp_catalog()[:3]], counter=COUNTER, effective_window=10)
    answer = few.tool_search({"query": "xylophone"}).content
    assert answer.endswith(
        "Deferred tools: slack_post_message, slack_search_messages, slack_add_reaction."
    )


def test_bad_limit_is_an_error_the_model_can_fix(all_deferred: ToolDeferral) -> None:
    result = all_deferred.tool_search({"query": "slack", "limit": "many"})
    assert result.is_error
    assert "limit" in result.content
    as_text = all_deferred.tool_search({"query": "slack", "limit": "1"})
    assert as_text.content.count("\n## ") == 1


def test_search_with_nothing_deferred_says_so() -> None:
    deferral = ToolDeferral()
    deferral.select(BUILTINS, counter=COUNTER, effective_window=200_000)
    result = deferral.tool_search({"query": "anything"})
    assert "No tools are deferred" in result.content
    assert not result.is_error


def test_identifiers_split_into_words() -> None:
    assert split_words("getHTTPResponse.v2") == ["get", "http", "response", "v2"]
    assert split_words("mcp__github__create_issue") == ["mcp", "github", "create", "issue"]
    assert split_words("kebab-case name") == ["kebab", "case", "name"]
    assert search_terms("Creating the issues") == search_terms("create issue")


def test_bm25_prefers_rare_terms_and_short_documents() -> None:
    index = BM25Index([["slack", "post"], ["slack", "post", "x", "y", "z", "w"], ["jira", "post"]])
    scores = index.scores(["slack", "post"])
    assert scores[0] > scores[1] > scores[2] > 0
    assert index.scores(["absent"]) == [0.0, 0.0, 0.0]


# --------------------------------------------------------------------------------------------------
# Engine tools
# --------------------------------------------------------------------------------------------------


def test_engine_tools() -> None:
    assert engine_tools(deferred=False) == [READ_RESULT_TOOL, COMPACT_CONTEXT_TOOL]
    assert engine_tools(deferred=True) == [READ_RESULT_TOOL, COMPACT_CONTEXT_TOOL, TOOL_SEARCH_TOOL]
    assert {t.source for t in engine_tools(deferred=True)} == {"engine"}


def test_engine_tool_schemas() -> None:
    search = TOOL_SEARCH_TOOL.parameters
    assert search["required"] == ["query"]
    assert set(search["properties"]) == {"query", "limit"}
    compact = COMPACT_CONTEXT_TOOL.parameters
    assert set(compact["properties"]) == {"focus"}
    assert "required" not in compact
    assert "before a large operation" in COMPACT_CONTEXT_TOOL.description
    for tool in engine_tools(deferred=True):  # what providers receive is plain JSON
        json.dumps(tool.to_openai())
        json.dumps(tool.to_anthropic())


def test_selection_type() -> None:
    selection = ToolDeferral().select([], counter=COUNTER, effective_window=1_000)
    assert selection == ToolSelection((), (), 0, 100, None)


def test_deferral_state_round_trips_through_json_and_ignores_what_it_cannot_read() -> None:
    deferral = ToolDeferral()
    for name in ("grep", "mcp__jira__close", "grep", "mcp__wiki__search"):
        deferral.mark_used(name)
    deferral.activate(["mcp__dns__list"])
    restored = ToolDeferral()
    restored.restore(json.loads(json.dumps(deferral.state())))
    assert restored.state() == deferral.state()
    assert restored.activated == {"mcp__dns__list"}
    restored.mark_used("mcp__jira__close")  # later uses rank after the restored ones
    assert restored.state()["last_used"]["mcp__jira__close"] == 5

    damaged = ToolDeferral()
    damaged.restore({"uses": "many", "last_used": {"grep": "soon", "ls": 3}, "activated": "x"})
    assert damaged.state() == {
        "uses": 3,
        "last_used": {"ls": 3},
        "activated": [],
        "held": None,
        "squeezed": False,
    }


def _client_tools() -> list[ToolSpec]:
    """A coding agent's own tools, as the proxy passes them on (source ``client``)."""
    long = "Run it. " * 200
    return [
        _tool("Agent", long, ["prompt", "subagent_type"], "client"),
        _tool("Bash", "Run a shell command.", ["command", "timeout"], "client"),
        _tool("Edit", "Replace a string in a file.", ["file_path", "old", "new"], "client"),
        _tool("Read", "Read a file.", ["file_path", "offset", "limit"], "client"),
        _tool("WebFetch", long, ["url", "prompt"], "client"),
    ]


def test_client_tools_past_their_share_are_deferred_largest_first_and_the_choice_is_held() -> None:
    tools = _client_tools()
    small = [t for t in tools if t.name in ("Bash", "Edit", "Read")]
    window = window_for([*small, TOOL_SEARCH_TOOL]) + 20
    deferral = ToolDeferral()
    first = deferral.select(tools, counter=COUNTER, effective_window=window)
    assert first.deferred_names == ("Agent", "WebFetch")
    assert [t.name for t in first.active] == ["Bash", "Edit", "Read", "tool_search"]

    # A larger window (or anything else) does not change the list: it opens the cached prefix.
    again = deferral.select(tools, counter=COUNTER, effective_window=window * 10)
    assert again.active == first.active
    # Restored from its saved state, the session keeps the same list.
    restored = ToolDeferral()
    restored.restore(json.loads(json.dumps(deferral.state())))
    assert restored.select(tools, counter=COUNTER, effective_window=window) == first

    # Only a refresh (after a compaction) chooses again.
    deferral.refresh()
    fresh = deferral.select(tools, counter=COUNTER, effective_window=window * 10)
    assert fresh.deferred == ()


def test_a_squeeze_defers_every_client_tool_the_model_never_called_for_good() -> None:
    """Before a compaction the proxy's engine squeezes: the tools the conversation used stay,
    the others wait behind tool_search, also after a later refresh; a tool called after the
    squeeze comes back. Nothing to squeeze before the model called a client tool."""
    tools = _client_tools()
    deferral = ToolDeferral()
    big = window_for(tools) * 10
    assert deferral.select(tools, counter=COUNTER, effective_window=big).deferred == ()
    assert not deferral.squeeze(tools)  # nothing used yet: nothing says what the agent needs
    deferral.mark_used("Bash")
    deferral.mark_used("Read")
    assert deferral.squeeze(tools)
    assert not deferral.squeeze(tools)  # squeezed already
    squeezed = deferral.select(tools, counter=COUNTER, effective_window=big)
    assert [t.name for t in squeezed.active] == ["Bash", "Read", "tool_search"]
    deferral.refresh()
    assert deferral.select(tools, counter=COUNTER, effective_window=big) == squeezed
    restored = ToolDeferral()
    restored.restore(json.loads(json.dumps(deferral.state())))
    assert restored.select(tools, counter=COUNTER, effective_window=big) == squeezed
    deferral.mark_used("Edit")
    again = deferral.select(tools, counter=COUNTER, effective_window=big)
    assert [t.name for t in again.active] == ["Bash", "Edit", "Read", "tool_search"]


def test_a_deferred_client_tool_the_model_called_stays_from_then_on() -> None:
    tools = _client_tools()
    small = [t for t in tools if t.name in ("Bash", "Edit", "Read")]
    window = window_for([*small, TOOL_SEARCH_TOOL]) + 20
    deferral = ToolDeferral()
    deferral.select(tools, counter=COUNTER, effective_window=window)
    deferral.mark_used("WebFetch")
    deferral.end_turn()
    for _ in range(3):
        selection = deferral.select(tools, counter=COUNTER, effective_window=window)
        assert "WebFetch" in [t.name for t in selection.active]
        assert selection.deferred_names == ("Agent",)
    deferral.refresh()  # even a fresh choice keeps a tool the conversation used
    assert (
        "WebFetch"
        not in deferral.select(tools, counter=COUNTER, effective_window=window).deferred_names
    )


# --------------------------------------------------------------------------------------------------
# Remembered encodings: each turn's selection equals a fresh deferral's
# --------------------------------------------------------------------------------------------------


def _fresh_selection(tools: Sequence[ToolSpec], window: int) -> ToolSelection:
    return ToolDeferral().select(tools, counter=COUNTER, effective_window=window)


@pytest.mark.parametrize("window", [100, 128_000, 2_000_000])
def test_a_selection_made_again_equals_a_fresh_ones(window: int) -> None:
    tools = [*BUILTINS, *mcp_catalog()]
    deferral = ToolDeferral()
    for _ in range(4):  # from the third on, selections answer from what was encoded
        selection = deferral.select(tools, counter=COUNTER, effective_window=window)
        assert selection == _fresh_selection(tools, window)
        assert selection.description_tokens == COUNTER.count_tools(selection.active)


def test_parameters_changed_in_place_are_encoded_again() -> None:
    """A ToolSpec is frozen but its parameters dict is not: a change made in place between two
    turns is seen (the remembered encodings compare the parameters with a copy)."""
    schema: dict[str, object] = {"type": "object", "properties": {"x": {"type": "string"}}}
    tool = ToolSpec("grow", "A tool whose schema grows in place.", schema, "builtin")
    tools = [*BUILTINS, tool]
    deferral = ToolDeferral()
    for _ in range(3):  # remembered from the second time on: the change comes after that
        before = deferral.select(tools, counter=COUNTER, effective_window=2_000_000)
    properties = schema["properties"]
    assert isinstance(properties, dict)
    properties["y"] = {"type": "string", "description": "a much longer description " * 20}
    after = deferral.select(tools, counter=COUNTER, effective_window=2_000_000)
    assert after.description_tokens > before.description_tokens
    assert after == _fresh_selection(tools, 2_000_000)
    assert after.description_tokens == COUNTER.count_tools(tools)
    del properties["y"]
    assert deferral.select(tools, counter=COUNTER, effective_window=2_000_000) == before


def test_a_small_window_selection_sees_a_schema_grown_in_place() -> None:
    catalog = mcp_catalog()
    tools = [*BUILTINS, *catalog]
    deferral = ToolDeferral()
    for _ in range(3):
        deferral.select(tools, counter=COUNTER, effective_window=128_000)
    grown = catalog[0].parameters["properties"]
    grown["extra"] = {"type": "string", "description": "padding " * 400}
    selection = deferral.select(tools, counter=COUNTER, effective_window=128_000)
    assert selection == _fresh_selection(tools, 128_000)
    assert selection.description_tokens == COUNTER.count_tools(selection.active)


def test_tools_made_anew_for_every_call_select_as_a_fresh_deferral_does() -> None:
    deferral = ToolDeferral()
    for _ in range(3):
        tools = [*BUILTINS, *mcp_catalog()]  # new objects, equal values
        selection = deferral.select(tools, counter=COUNTER, effective_window=128_000)
        assert selection == _fresh_selection(tools, 128_000)
