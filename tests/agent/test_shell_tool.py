"""The shell tool: exit codes, interleaved output, timeouts that stop children, no leaked keys."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from contextfold.agent import ApprovalPolicy, Toolbox, Workspace, coding_toolbox, shell_tool
from contextfold.agent.shell_tool import SHELL_ENV_DEFAULTS, scrubbed_environment
from contextfold.config import API_KEY_ENV_VARS
from contextfold.history.facts import _exit_code as summary_exit_code
from contextfold.outputs.placeholders import exit_code as placeholder_exit_code
from tests.agent.conftest import failed, ok, run

PROCESS_GONE_WAIT = 5.0
"""Longest wait for a killed process to disappear (a poll, not a timing assertion)."""


def is_running(pid: int) -> bool:
    """True while ``pid`` is a live process (a zombie awaiting its reaper counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def wait_until_gone(pid: int) -> bool:
    deadline = time.monotonic() + PROCESS_GONE_WAIT
    while is_running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_output_ends_with_the_exit_code(toolbox: Toolbox) -> None:
    assert ok(toolbox, "shell", command="echo hello") == "hello\nexit code: 0"
    outcome = run(toolbox, "shell", command="echo failing; exit 3")
    assert outcome.content == "failing\nexit code: 3"
    assert outcome.metadata["exit_code"] == 3
    # A failing command is information for the model, not a failed tool call.
    assert not outcome.is_error


def test_the_summarizer_and_the_placeholders_read_the_exit_code(toolbox: Toolbox) -> None:
    content = ok(toolbox, "shell", command="echo building; exit 2")
    assert summary_exit_code(content) == 2
    assert placeholder_exit_code(content) == 2
    killed = ok(toolbox, "shell", command="kill -9 $$")
    assert summary_exit_code(killed) == 137
    assert placeholder_exit_code(killed) == 137


def test_stdout_and_stderr_interleave_in_order(toolbox: Toolbox) -> None:
    text = ok(toolbox, "shell", command="echo one; echo two >&2; echo three; echo four >&2")
    assert text == "one\ntwo\nthree\nfour\nexit code: 0"


def test_runs_in_the_workspace_root(toolbox: Toolbox, root: Path) -> None:
    assert ok(toolbox, "shell", command="pwd -P").splitlines()[0] == str(root)


def test_no_output_is_said(toolbox: Toolbox) -> None:
    assert ok(toolbox, "shell", command="true") == "(no output)\nexit code: 0"


def test_stdin_is_closed(toolbox: Toolbox) -> None:
    # `read` gets end-of-file at once instead of waiting for input that never comes.
    text = ok(toolbox, "shell", command='read answer; echo "read returned $?"; cat; echo done')
    assert text == "read returned 1\ndone\nexit code: 0"


def test_a_signal_shows_as_the_shell_would_report_it(toolbox: Toolbox) -> None:
    assert ok(toolbox, "shell", command="kill -9 $$").endswith("exit code: 137 (killed by SIGKILL)")


def test_timeout_stops_the_command_and_its_children(toolbox: Toolbox, root: Path) -> None:
    outcome = run(
        toolbox, "shell", command="echo started; sleep 30 & echo $! > child.pid; sleep 30"
    )
    assert outcome.is_error
    lines = outcome.content.splitlines()
    assert lines[0] == "started"
    assert lines[1].startswith("[timed out after 0.5 s")
    assert lines[-1] == "exit code: 124 (timed out)"
    assert wait_until_gone(int((root / "child.pid").read_text()))


def test_children_ignoring_sigterm_are_killed(
    toolbox: Toolbox, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shell_tool, "SHELL_KILL_GRACE_SECONDS", 0.1)
    command = "(trap '' TERM; echo $BASHPID > child.pid; sleep 30) & sleep 30"
    assert "timed out" in failed(toolbox, "shell", command=command)
    assert wait_until_gone(int((root / "child.pid").read_text()))


def test_the_call_may_set_its_own_timeout(workspace: Workspace) -> None:
    toolbox = coding_toolbox(workspace, ApprovalPolicy.auto(), shell_timeout=30)
    assert "after 30 s" in next(s for s in toolbox.specs() if s.name == "shell").description
    assert "timed out after 1 s" in failed(toolbox, "shell", command="sleep 30", timeout=1)


def test_background_jobs_holding_the_output_do_not_block(toolbox: Toolbox, root: Path) -> None:
    text = ok(toolbox, "shell", command="sleep 30 & echo $! > bg.pid; echo launched")
    pid = int((root / "bg.pid").read_text())
    try:
        assert text.startswith("launched\n")
        assert "background processes still hold the output open" in text
        assert text.endswith("exit code: 0")
    finally:
        os.kill(pid, signal.SIGKILL)


FAKE_CREDENTIALS: dict[str, str] = {
    "OPENAI_API_KEY": "fake-openai-0001",
    "ANTHROPIC_API_KEY": "fake-anthropic-0002",
    "OPENROUTER_API_KEY": "fake-openrouter-0003",
    "DEEPSEEK_API_KEY": "fake-deepseek-0004",
    "GEMINI_API_KEY": "fake-gemini-0005",
    "MISTRAL_API_KEY": "fake-mistral-0006",
    "DATABASE_URL": "postgresql://app@db.internal:5432/app-fake-0007",
    "PGPASSWORD": "fake-pg-0008",
    "MYSQL_PWD": "fake-mysql-0009",
    "REDIS_URL": "redis://:fake-redis-0010@cache:6379/0",
    "CELERY_BROKER_URL": "amqp://worker:fake-amqp-0011@mq:5672//",
    "DJANGO_SECRET_KEY": "fake-django-0012",
    "CLIENT_SECRETS": "fake-client-0013",
    "SLACK_BOT_TOKEN": "fake-slack-0014",
    "NPM_TOKEN": "fake-npm-0015",
    "STRIPE_KEY": "fake-stripe-0016",
    "AWS_ACCESS_KEY_ID": "fake-aws-id-0017",
    "AWS_SECRET_ACCESS_KEY": "fake-aws-secret-0018",
    "AWS_SESSION_TOKEN": "fake-aws-session-0019",
    "SMTP_PASSWORD": "fake-smtp-0020",
    "DB_PASS": "fake-dbpass-0021",
    "HF_TOKEN": "fake-hf-0022",
    "GITHUB_TOKEN": "fake-github-0023",
    "AZURE_STORAGE_CONNECTION_STRING": (
        "DefaultEndpointsProtocol=https;AccountName=dev;AccountKey=fake-azure-0024"
    ),
    "GOOGLE_APPLICATION_CREDENTIALS": "/run/secrets/fake-gcp-0025.json",
    "NPM_CONFIG__AUTH": "fake-npm-auth-0026",
    "CONTEXTFOLD_API_KEY": "fake-contextfold-0027",
    "CONTEXTFOLD_DATABASE_URL": "postgresql://cf:fake-cf-db-0028@localhost/cf",
    "JDBC_URL": "jdbc:mysql://db/app?user=app&password=fake-jdbc-0029",
    "MY_SERVICE_PRIVATE_KEY": "fake-private-0030",
}
"""Credentials as they sit in a developer's environment (fake values, each unique)."""

ORDINARY_VARIABLES: dict[str, str] = {
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TERM": "dumb",
    "EDITOR": "vi",
    "VIRTUAL_ENV": "/work/venv",
    "PYTHONPATH": "src",
    "TOKENIZERS_PARALLELISM": "false",
    "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock",
    "GPG_TTY": "/dev/pts/0",
    "KEYTIMEOUT": "1",
    "HTTP_PROXY": "http://proxy.internal:3128",
    "CACHE_URL": "redis://cache:6379/1",
    "NO_PROXY": "localhost,127.0.0.1",
    "HARMLESS_SETTING": "visible",
}
"""Variables that look nothing like a credential once read (some have KEY or TOKEN inside their
name, or a URL without a password): commands need them and must see them unchanged."""


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """This process's environment with :data:`FAKE_CREDENTIALS` and the ordinary variables set."""
    for name, value in {**FAKE_CREDENTIALS, **ORDINARY_VARIABLES}.items():
        monkeypatch.setenv(name, value)
    return FAKE_CREDENTIALS


def env_of(toolbox: Toolbox) -> dict[str, str]:
    """The environment a command run by the shell tool sees (from the output of ``env``)."""
    text = ok(toolbox, "shell", command="env")
    assert text.endswith("exit code: 0")
    return dict(line.split("=", 1) for line in text.splitlines()[:-1] if "=" in line)


def test_no_credential_reaches_a_command(workspace: Workspace, credentials: dict[str, str]) -> None:
    toolbox = coding_toolbox(workspace, ApprovalPolicy.auto())
    text = ok(toolbox, "shell", command="env")
    for name, value in credentials.items():
        assert value not in text, name
        assert f"\n{name}=" not in f"\n{text}", name


def test_the_allow_list_lets_a_named_credential_through(
    workspace: Workspace, credentials: dict[str, str]
) -> None:
    allowed = ["GITHUB_TOKEN", "DATABASE_URL"]
    toolbox = coding_toolbox(workspace, ApprovalPolicy.auto(), env_allow=allowed)
    env = env_of(toolbox)
    for name, value in credentials.items():
        if name in allowed:
            assert env[name] == value  # passed through on purpose
        else:
            assert name not in env and value not in env.values()


def test_nothing_but_credentials_is_taken_from_a_command(
    workspace: Workspace, credentials: dict[str, str]
) -> None:
    env = env_of(coding_toolbox(workspace, ApprovalPolicy.auto()))
    for name in ("PATH", "HOME", *ORDINARY_VARIABLES):
        assert env.get(name) == os.environ[name], name
    assert env["PAGER"] == "cat"


def test_every_providers_key_variable_is_a_credential() -> None:
    for name in (*API_KEY_ENV_VARS.values(), "AZURE_OPENAI_API_KEY", "GROQ_API_KEY", "GH_TOKEN"):
        assert scrubbed_environment({name: "x"}) == SHELL_ENV_DEFAULTS, name


def test_scrubbing_takes_out_exactly_the_credentials() -> None:
    ordinary = {"PATH": "/usr/bin:/bin", "HOME": "/home/dev", "USER": "dev", **ORDINARY_VARIABLES}
    env = scrubbed_environment({**ordinary, **FAKE_CREDENTIALS})
    assert env == {**ordinary, **SHELL_ENV_DEFAULTS}
    kept = scrubbed_environment({**ordinary, **FAKE_CREDENTIALS}, allow=["STRIPE_KEY"])
    assert kept == {**ordinary, **SHELL_ENV_DEFAULTS, "STRIPE_KEY": "fake-stripe-0016"}


def test_huge_output_keeps_its_start_and_end(
    toolbox: Toolbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shell_tool, "SHELL_MAX_OUTPUT_BYTES", 64 * 1024)
    outcome = run(
        toolbox,
        "shell",
        command="echo FIRST; head -c 1000000 /dev/zero | tr '\\0' x; echo; echo LAST",
    )
    text = outcome.content
    assert text.startswith("FIRST\n")
    assert "of output omitted here to protect memory" in text
    assert text.endswith("LAST\nexit code: 0")
    assert len(text) < 70 * 1024
    assert outcome.metadata["omitted_bytes"] > 900_000


def test_an_empty_command_is_refused(toolbox: Toolbox) -> None:
    assert "command is empty" in failed(toolbox, "shell", command="  ")
