"""What a shell command reads and writes, read from its text (no execution).

Agents that only have a shell (mini-swe-agent, Codex, Claude Code's Bash) edit files with
``sed -i``, ``cat > f <<EOF``, ``echo >>``, ``tee`` or a Python heredoc, and read them with
``cat``, ``head``, ``nl``, ``sed -n``, ``grep -n`` or ``git diff``. The summary lists those files,
so this module recognises the common forms. It is deliberately conservative: a word counts as a
file read only when it looks like a file (it has an extension or a known name), while any target
of a write counts.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

__all__ = ["ShellEffects", "shell_effects"]

_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_PY_WRITE = re.compile(
    r"""open\(\s*[rbf]?(['"])([^'"\n]+)\1\s*,\s*(?:mode\s*=\s*)?[rbf]?['"][^'"]*[wax]"""
    r"""|Path\(\s*[rbf]?(['"])([^'"\n]+)\3\s*\)\s*\.write_(?:text|bytes)"""
)
_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "\n", "(", ")", "|&"})
_NOT_FILES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "-"})
_FILE_NAMES = frozenset({"Makefile", "Dockerfile", "README", "LICENSE", "CHANGELOG", "Gemfile"})
_EXT = re.compile(r"[^/]\.[A-Za-z][A-Za-z0-9_]{0,11}$")

_READERS = frozenset(
    {"cat", "head", "tail", "nl", "less", "more", "bat", "wc", "sort", "uniq", "strings", "od"}
)
_SEARCHERS = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "git-grep"})
_VALUE_OPTIONS: dict[str, frozenset[str]] = {
    "head": frozenset({"-n", "-c"}),
    "tail": frozenset({"-n", "-c"}),
    "grep": frozenset({"-A", "-B", "-C", "-m", "-e", "-f", "--include", "--exclude"}),
    "rg": frozenset({"-A", "-B", "-C", "-m", "-e", "-g", "-t", "--glob", "--type"}),
    "sed": frozenset({"-e", "-f"}),
    "perl": frozenset({"-e", "-E", "-I", "-M"}),
    "nl": frozenset({"-b", "-s", "-w", "-v", "-i"}),
    "awk": frozenset({"-F", "-v", "-f"}),
}
_PREFIX_WORDS = frozenset({"sudo", "time", "nohup", "env", "command", "exec", "xargs"})
_PYTHONS = re.compile(r"^python[0-9.]*$")


@dataclass
class ShellEffects:
    """Files a command reads and writes, and the names of the programs it runs."""

    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    programs: list[str] = field(default_factory=list)

    def add_read(self, word: str) -> None:
        """Record a read of ``word`` when it looks like a file."""
        if looks_like_file(word) and word not in self.reads:
            self.reads.append(word)

    def add_write(self, word: str) -> None:
        """Record a write of ``word`` unless it is a device or a file descriptor."""
        word = word.strip()
        if (
            word
            and word not in _NOT_FILES
            and not word.startswith(("&", "$"))
            and not (word.isdigit())
        ) and word not in self.writes:
            self.writes.append(word)


def looks_like_file(word: str) -> bool:
    """True when ``word`` names a file rather than an option, a glob, a number or a directory."""
    if not word or word.startswith("-") or word in _NOT_FILES or any(c in word for c in "*?$`"):
        return False
    base = word.rstrip("/").rsplit("/", 1)[-1]
    if word.endswith("/"):
        return False
    return bool(_EXT.search(word)) or base in _FILE_NAMES


def shell_effects(command: str) -> ShellEffects:
    """The files ``command`` reads and writes, found in its text."""
    effects = ShellEffects()
    text, bodies = _strip_heredocs(command)
    for header, body in bodies:
        if _PYTHONS.match(header.split()[0] if header.split() else ""):
            _python_writes(body, effects)
    for words in _simple_commands(text):
        _one_command(words, effects)
    if "python" in text and " -c " in text:
        _python_writes(text, effects)
    return effects


def _strip_heredocs(command: str) -> tuple[str, list[tuple[str, str]]]:
    """The command without heredoc bodies, and each body with the command line that feeds it."""
    lines = command.split("\n")
    kept: list[str] = []
    bodies: list[tuple[str, str]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        kept.append(line)
        i += 1
        match = _HEREDOC.search(line)
        if not match:
            continue
        delimiter = match.group(2)
        body: list[str] = []
        while i < len(lines) and lines[i].strip() != delimiter:
            body.append(lines[i])
            i += 1
        i += 1  # the delimiter line
        kept[-1] = line[: match.start()] + line[match.end() :]
        header = line[: match.start()].strip()
        for sep in ("&&", ";", "|"):
            header = header.rsplit(sep, 1)[-1].strip()
        bodies.append((header, "\n".join(body)))
    return "\n".join(kept), bodies


def _python_writes(code: str, effects: ShellEffects) -> None:
    for match in _PY_WRITE.finditer(code):
        effects.add_write(match.group(2) or match.group(4))


_PUNCTUATION = "();<>|&\n"
"""What the shell lexer makes tokens of its own (a run of them is one token: ``>>``, ``2>&1``)."""
_BLANKS = " \t\r"
_TOKEN = re.compile(
    r"""(?P<punctuation>[();<>|&\n]+)"""
    r"""|(?P<word>(?:'[^']*'|"(?:[^"\\]|\\[\s\S])*"|\\[\s\S]|[^ \t\r();<>|&\n'"\\])+)"""
    r"""|[ \t\r]+"""
)
"""One token of the shell lexer (a run of punctuation, or a word of quoted strings, escaped
characters and other non-blanks), or blanks."""
_WORD_PIECE = re.compile(r"""'([^']*)'|"((?:[^"\\]|\\[\s\S])*)"|\\([\s\S])|([^'"\\]+)""")
_ESCAPED_IN_DOUBLE_QUOTES = re.compile(r"""\\(["\\])""")


def _tokens(text: str) -> list[str]:
    """The words and punctuation runs of ``text`` as :mod:`shlex` reads them (POSIX, with
    punctuation characters, blanks only as whitespace, no comments); :class:`ValueError` for
    an unclosed quote or a trailing escape, as it raises.

    Its lexer is a pure-Python state machine, a call per character, and was most of what
    classifying a command cost; this reads the same tokens with two regular expressions (tested
    against it on generated and real commands). In a word, single quotes keep everything,
    double quotes keep everything but an escaped quote or backslash, and outside quotes an
    escape keeps the character it escapes."""
    tokens: list[str] = []
    end = 0
    for match in _TOKEN.finditer(text):
        if match.start() != end:
            break  # what no token matches: an unclosed quote or a trailing escape
        end = match.end()
        if match.lastgroup == "punctuation":
            tokens.append(match.group())
        elif match.lastgroup == "word":
            tokens.append(_word(match.group()))
    if end != len(text):
        return _shlex_tokens(text)  # raises, as the lexer does
    return tokens


def _word(word: str) -> str:
    if not any(c in word for c in "'\"\\"):
        return word
    pieces: list[str] = []
    for single, double, escaped, plain in _WORD_PIECE.findall(word):
        pieces.append(single or _ESCAPED_IN_DOUBLE_QUOTES.sub(r"\1", double) or escaped or plain)
    return "".join(pieces)


def _shlex_tokens(text: str) -> list[str]:
    """:func:`_tokens` by :mod:`shlex` itself."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=_PUNCTUATION)
    lexer.whitespace = _BLANKS
    lexer.whitespace_split = True
    lexer.commenters = ""
    return list(lexer)


def _simple_commands(text: str) -> list[list[str]]:
    """Split into simple commands (word lists), keeping redirections as their own words."""
    try:
        tokens = _tokens(text)
    except ValueError:
        tokens = re.findall(r">>|>|<|&&|\|\||[;|&\n]|[^\s;|&<>]+", text)
    out: list[list[str]] = []
    current: list[str] = []
    for token in tokens:
        if token in _SEPARATORS or (token and set(token) <= set(";|&\n()")):
            if current:
                out.append(current)
            current = []
        else:
            current.append(token)
    if current:
        out.append(current)
    return out


def _one_command(words: list[str], effects: ShellEffects) -> None:
    args: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word in (">", ">>", ">|", "&>", "&>>") and i + 1 < len(words):
            effects.add_write(words[i + 1])
            i += 2
            continue
        if word in (">&", "<&", "<<<") and i + 1 < len(words):
            i += 2
            continue
        if word == "<" and i + 1 < len(words):
            effects.add_read(words[i + 1])
            i += 2
            continue
        args.append(word)
        i += 1
    while args and (args[0] in _PREFIX_WORDS or re.match(r"^[A-Za-z_]\w*=", args[0])):
        args = args[1:]
    if args and args[0] == "timeout":
        args = args[2:]
    if not args:
        return
    program = args[0].rsplit("/", 1)[-1]
    effects.programs.append(program)
    rest = args[1:]
    if program == "git" and rest:
        _git(rest, effects)
    elif program in ("sed", "perl"):
        _sed(program, rest, effects)
    elif program in _READERS or program == "awk":
        for word in _operands(program, rest, skip_first=program == "awk"):
            effects.add_read(word)
    elif program in _SEARCHERS:
        explicit = any(w in ("-e", "-f") for w in rest)
        for word in _operands(program, rest, skip_first=not explicit):
            effects.add_read(word)
    elif program in ("tee", "touch", "rm", "truncate"):
        for word in rest:
            if not word.startswith("-"):
                effects.add_write(word)
    elif program in ("cp", "mv", "install", "ln"):
        operands = [w for w in rest if not w.startswith("-")]
        if len(operands) >= 2:
            effects.add_write(operands[-1])
            if program == "mv":
                effects.add_write(operands[0])


def _operands(program: str, args: list[str], *, skip_first: bool) -> list[str]:
    """The non-option words of a command (option values skipped), minus a leading script."""
    takes_value = _VALUE_OPTIONS.get(program, frozenset())
    out: list[str] = []
    skip = False
    for word in args:
        if skip:
            skip = False
            continue
        if word in takes_value:
            skip = True
            continue
        if word.startswith("-") and word != "-":
            continue
        out.append(word)
    return out[1:] if skip_first and out else out


def _sed(program: str, args: list[str], effects: ShellEffects) -> None:
    in_place = any(w == "--in-place" or (w.startswith("-") and "i" in w[1:3]) for w in args)
    explicit_script = any(w in ("-e", "-f") for w in args)
    if program == "perl":
        # perl -pi -e 'script' files: the script follows -e, every other operand is a file.
        explicit_script = True
    files = _operands(program, args, skip_first=not explicit_script)
    for word in files:
        if in_place:
            effects.add_write(word)
        else:
            effects.add_read(word)


def _git(args: list[str], effects: ShellEffects) -> None:
    sub = args[0]
    rest = [w for w in args[1:] if w != "--"]
    if sub in ("diff", "show", "blame", "log"):
        for word in rest:
            effects.add_read(word)
    elif sub in ("checkout", "restore", "rm", "mv"):
        for word in rest:
            if looks_like_file(word):
                effects.add_write(word)


def split_command_words(command: str) -> list[str]:
    """The command's words, best effort (for naming an action in one line)."""
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()
