"""The secret shapes :mod:`contextfold.redaction.redactor` recognises, and the literals that
announce them.

Two kinds of rule:

- :class:`TokenRule`: a credential with a shape of its own (a vendor prefix such as ``ghp_`` or
  ``sk_live_``, a JWT, a PEM block, a URL's password). Each names one or more *triggers*: a
  literal the rule's pattern cannot match without, written as an anchor character (a rare one:
  ``- _ . : = / z J K I``) and a fixed-width look-behind. All triggers form one regular
  expression that finds, in a single pass, which rules can match at all; only those run.
- :class:`WordRule`: a credential announced by a word (``password=…``, ``Authorization: …``,
  ``mysql -p…``), found where the word occurs in the lower-cased text and matched from there.

Every pattern starts with a literal, so a scan skips ahead in C; the rules run only where their
trigger or word occurs. A replaced span never holds a quote or an unpaired backslash, so JSON
text inside a string stays valid JSON (see :mod:`contextfold.redaction.redactor`).
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = [
    "MARKER_PREFIX",
    "TOKEN_RULES",
    "WORD_RULES",
    "KeyBodyBeforeEnd",
    "Span",
    "TokenRule",
    "WordRule",
    "is_marker",
    "is_placeholder",
    "name_kind",
    "value_is_secret",
]

Span = tuple[int, int, str]
"""``(start, end, kind)``: a stretch of text to replace by the marker of ``kind``."""

MARKER_PREFIX = "[REDACTED:"


def is_marker(value: str) -> bool:
    """True when ``value`` is (or starts with) a redaction marker: already redacted."""
    return value.startswith(MARKER_PREFIX)


# Characters that may touch a token without ending it: "disk-usage..." is no "sk-" key.
_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_WORDISH = _ALNUM | {"_", "-"}


def _starts_token(text: str, start: int, joining: frozenset[str] = _WORDISH) -> bool:
    """True when a token (or word) may begin at ``start``: after none of the ``joining``
    characters, or right after a JSON escape such as ``\\n`` (the next line of an escaped
    text)."""
    if start == 0 or text[start - 1] not in joining:
        return True
    return text[start - 1] in "nrt" and text[start - 2 : start - 1] == "\\"


@dataclass(frozen=True)
class TokenRule:
    """A credential with a shape of its own.

    ``triggers`` are ``(anchor, rest)`` pairs of regular expressions: ``anchor`` one literal
    character, rare in ordinary text (``\\.`` for a dot), and ``rest`` usually a look-behind;
    together they match wherever ``pattern`` could. ``group`` is the part replaced; ``check``
    refuses a match that has the shape but not the substance (a token without a digit).

    A pattern starts with a literal, so that a scan skips ahead in C. When a token's first
    characters are common (``[rs]k_live_``, 32 hex digits before ``-us21``), the pattern starts
    at the rarer literal inside it and captures what comes before in a look-behind group named
    ``lead``, where the token (and the replaced span, for ``group`` 0) then begins.
    """

    kind: str
    triggers: tuple[tuple[str, str], ...]
    pattern: re.Pattern[str]
    group: int | str = 0
    bounded: bool = True
    """The token must start after no word character (see :func:`_starts_token`)."""
    check: Callable[[re.Match[str]], bool] | None = None

    def spans(self, text: str) -> Iterator[Span]:
        """Where this rule's secrets lie in ``text``."""
        leads = "lead" in self.pattern.groupindex
        for match in self.pattern.finditer(text):
            begins = match.start("lead") if leads else match.start()
            if self.bounded and not _starts_token(text, begins):
                continue
            if self.check is not None and not self.check(match):
                continue
            start, end = match.span(self.group)
            start = begins if self.group == 0 else start
            if start < end and not is_marker(text[start:end]):
                yield start, end, self.kind


def _rule(
    kind: str,
    triggers: str | tuple[str, ...],
    pattern: str,
    *,
    group: int | str = 0,
    bounded: bool = True,
    check: Callable[[re.Match[str]], bool] | None = None,
) -> TokenRule:
    """A :class:`TokenRule`; each trigger is written as one string whose anchor is its first
    character (or its first two, for an escaped one such as ``\\.``)."""
    pairs = []
    for trigger in (triggers,) if isinstance(triggers, str) else triggers:
        size = 2 if trigger.startswith("\\") else 1
        pairs.append((trigger[:size], trigger[size:]))
    return TokenRule(kind, tuple(pairs), re.compile(pattern), group, bounded, check)


def _has_digit(match: re.Match[str]) -> bool:
    return any(c.isdigit() for c in match.group(0))


def _mixed_case(match: re.Match[str]) -> bool:
    value = match.group(0)
    return any(c.isupper() for c in value) and any(c.islower() for c in value)


def _private_key_inside(match: re.Match[str]) -> bool:
    """True when base64 text decodes to a PEM private key's BEGIN line (kubeconfig's
    ``client-key-data``), not a certificate's."""
    head = match.group(0)[:96]
    try:
        return b"PRIVATE KEY" in base64.b64decode(head[: len(head) // 4 * 4])
    except (binascii.Error, ValueError):
        return False


# A PEM private key (RSA, EC, PKCS#8, encrypted, OpenSSH, PGP), through its END line, or as far
# as its body goes when the text was cut before it (a truncated `cat id_rsa` still leaks most of
# the key). The body may hold headers (Proc-Type: 4,ENCRYPTED) and JSON escapes (\n).
_PEM_LABEL = r"[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?"
_PEM = (
    rf"-----BEGIN {_PEM_LABEL}-----"
    r"(?:(?!-----END)(?:[A-Za-z0-9+/=:,.\- \t\r\n]|\\+[nrt]))*"
    rf"(?:-----END {_PEM_LABEL}-----)?"
)
_PEM_END = re.compile(rf"-----END {_PEM_LABEL}-----")
_REVERSED_BODY = re.compile(r"(?:[nrt]\\+|[A-Za-z0-9+/= \t\r\n])*")
_B64_RUN = re.compile(r"[A-Za-z0-9+/=]+")
PEM_BODY_MAX = 64 * 1024
"""How far back from an END line a key body is looked for (an 8192-bit RSA key is ~6.4 kB)."""
PEM_BODY_MIN = 40
"""Base64 characters before an END line that make a key body whose BEGIN line was cut off."""


class KeyBodyBeforeEnd(TokenRule):
    """Key bodies whose BEGIN line is gone (a cut output): the base64 lines right before an
    END line."""

    def spans(self, text: str) -> Iterator[Span]:
        for match in self.pattern.finditer(text):
            # Read backwards (a reversed slice matched forwards) over base64, blanks and line
            # breaks, escaped ones included whole.
            before = text[max(0, match.start() - PEM_BODY_MAX) : match.start()][::-1]
            body = _REVERSED_BODY.match(before)
            if body is not None and sum(map(len, _B64_RUN.findall(body.group()))) >= PEM_BODY_MIN:
                yield match.start() - body.end(), match.end(), self.kind


_B64URL = r"[A-Za-z0-9_\-]"
_LINE_END = r"(?:\r?\n|(?:\\+[rn])+)"  # a line break, or its JSON escape (escaped again, maybe)

TOKEN_RULES: tuple[TokenRule, ...] = (
    _rule("private-key", "-----BEGIN " + _PEM_LABEL, _PEM, bounded=False),
    KeyBodyBeforeEnd("private-key", (("-", "----END " + _PEM_LABEL),), _PEM_END),
    _rule(
        "private-key",
        "J(?<=LS0tLS1CRUdJ)",
        r"LS0tLS1CRUdJTi[A-Za-z0-9+/=]{20,}",
        check=_private_key_inside,
    ),
    _rule(
        "private-key",
        ":(?<=Private-Lines:)",
        rf"Private-Lines: *\d+{_LINE_END}(?P<body>(?:[A-Za-z0-9+/=]+(?:{_LINE_END}|$))+)",
        group="body",
        bounded=False,
    ),
    # sk-..., sk-proj-..., sk-ant-api03-..., sk-or-v1-...: OpenAI, Anthropic, OpenRouter,
    # DeepSeek. At least one digit, so "sk-learn-model-selection-utilities" is left alone.
    _rule("api-key", "-(?<=sk-)", r"sk-(?=[A-Za-z_-]*[0-9])[A-Za-z0-9_\-]{20,}"),
    _rule("mapbox-token", "\\.(?<=sk\\.)eyJ", rf"sk\.eyJ{_B64URL}{{10,}}\.{_B64URL}{{10,}}"),
    _rule(
        "stripe-key",
        ("_(?<=sk_live_)", "_(?<=rk_live_)", "_(?<=sk_test_)", "_(?<=rk_test_)"),
        r"k_(?<=(?P<lead>[rs])k_)(?:live|test)_[A-Za-z0-9]{16,}",
    ),
    _rule("stripe-key", "_(?<=whsec_)", r"whsec_[A-Za-z0-9+/=]{24,}"),
    _rule(
        "aws-access-key-id", ("K(?<=AK)IA", "I(?<=ASI)A"), r"(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])"
    ),
    # A CSV or table row: the secret access key right after its key id.
    _rule(
        "aws-secret-key",
        ("K(?<=AK)IA", "I(?<=ASI)A"),
        r"(?:AKIA|ASIA)[A-Z0-9]{16}[ \t]*[,;|\t:=][ \t]*"
        r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        group="secret",
    ),
    _rule("github-token", "_(?<=gh[pousr]_)", r"gh[pousr]_[A-Za-z0-9]{30,}"),
    _rule("github-token", "_(?<=github_pat_)", r"github_pat_[A-Za-z0-9_]{22,}"),
    _rule(
        "gitlab-token",
        ("-(?<=gl[a-z]{2}-)", "-(?<=gl[a-z]{3}-)", "-(?<=gl[a-z]{4}-)"),
        r"gl(?:pat|dt|rt|ptt|ft|cbt|imt|oas|soat|ffct|agent)-[A-Za-z0-9_\-]{20,}",
    ),
    _rule("huggingface-token", "_(?<=hf_)", r"hf_[A-Za-z0-9]{30,}", check=_mixed_case),
    _rule("npm-token", "_(?<=npm_)", r"npm_[A-Za-z0-9]{36,}"),
    _rule("pypi-token", "-(?<=pypi-)A", rf"pypi-AgE{_B64URL}{{50,}}"),
    _rule("sendgrid-key", "\\.(?<=SG\\.)", rf"SG\.{_B64URL}{{16,32}}\.{_B64URL}{{16,64}}"),
    _rule(
        "twilio-key",
        "K(?<=SK)[0-9a-fA-F]",
        r"SK[0-9a-fA-F]{32}(?![A-Za-z0-9])",
    ),
    _rule(
        "azure-key", "=(?<=AccountKey=)", r"AccountKey=(?P<key>[A-Za-z0-9+/=]{20,})", group="key"
    ),
    _rule(
        "azure-key",
        "=(?<=SharedAccessKey=)",
        r"SharedAccessKey=(?P<key>[A-Za-z0-9+/=]{20,})",
        group="key",
    ),
    _rule("azure-sas-signature", "=(?<=sig=)", r"sig=(?P<sig>[A-Za-z0-9%+/=]{16,})", group="sig"),
    _rule("slack-token", "-(?<=xox[abposer]-)", r"xox[abposer]-[A-Za-z0-9\-]{10,}"),
    _rule("slack-token", "-(?<=xapp-)", r"xapp-\d-[A-Za-z0-9\-]{10,}"),
    _rule(
        "slack-webhook",
        "/(?<=hooks.slack.com/)",
        r"hooks\.slack\.com/services/(?P<path>[A-Za-z0-9_/\-]{20,})",
        group="path",
    ),
    _rule(
        "discord-webhook",
        "/(?<=api/webhooks/)",
        rf"api/webhooks/\d+/(?P<token>{_B64URL}{{20,}})",
        group="token",
    ),
    _rule("google-api-key", "z(?<=AIz)a", rf"AIza{_B64URL}{{35}}"),
    _rule("google-oauth-secret", "-(?<=GOCSPX-)", rf"GOCSPX-{_B64URL}{{20,}}"),
    _rule("google-oauth-token", "\\.(?<=ya29\\.)", rf"ya29\.{_B64URL}{{20,}}"),
    _rule("shopify-token", "_(?<=shp[a-z]{2}_)", r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}"),
    _rule("digitalocean-token", "_(?<=_v1_)", r"do[por]_v1_[a-f0-9]{64}"),
    _rule("vault-token", "\\.(?<=hv[sbr]\\.)", rf"hv[sbr]\.{_B64URL}{{24,}}"),
    _rule("age-secret-key", "-(?<=AGE-SECRET-KEY-)", r"AGE-SECRET-KEY-1[0-9A-Z]{50,}"),
    _rule("groq-key", "_(?<=gsk_)", r"gsk_[A-Za-z0-9]{40,}"),
    _rule("xai-key", "-(?<=xai-)", r"xai-[A-Za-z0-9]{60,}"),
    _rule("replicate-token", "_(?<=r8_)", r"r8_[A-Za-z0-9]{30,}", check=_has_digit),
    _rule("perplexity-key", "-(?<=pplx-)", r"pplx-[A-Za-z0-9]{40,}"),
    _rule("linear-key", "_(?<=lin_api_)", r"lin_api_[A-Za-z0-9]{32,}"),
    _rule("notion-token", "_(?<=ntn_)", r"ntn_[A-Za-z0-9]{40,}"),
    _rule("grafana-token", "_(?<=glsa_)", r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}"),
    _rule("supabase-token", "_(?<=sbp_)", r"sbp_[a-f0-9]{40}"),
    _rule("doppler-token", "\\.(?<=dp.st.)", r"dp\.st\.[A-Za-z0-9_\-.]{40,}"),
    _rule("new-relic-key", "-(?<=NRAK-)", r"NRAK-[A-Z0-9]{27}"),
    _rule("square-token", ("-(?<=sq0atp-)", "-(?<=sq0csp-)"), rf"sq0(?:atp|csp)-{_B64URL}{{22,}}"),
    _rule("sentry-token", "_(?<=sntrys_)", r"sntrys_[A-Za-z0-9+/=_]{50,}"),
    _rule("postman-key", "-(?<=PMAK-)", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}"),
    _rule("mailchimp-key", "-us", r"-(?<=(?P<lead>[0-9a-f]{32})-)us\d{1,2}(?![0-9])"),
    _rule(
        "telegram-bot-token",
        ":AA",
        rf":(?<=\d:)(?P<token>AA{_B64URL}{{33}})",
        group="token",
        bounded=False,
    ),
    _rule(
        "jwt",
        "J(?<=eyJ)",
        rf"eyJ{_B64URL}{{8,}}\.eyJ{_B64URL}{{8,}}\.{_B64URL}*",
    ),
    # user:password@ in any URL (postgresql://, mongodb+srv://, https://, amqp://, ...). The
    # password runs to the last "@" before the host, so an unencoded "@" in it is still covered.
    _rule(
        "url-password",
        "://",
        r"://(?P<user>[^\s/?#@:'\"\\<>]*):(?P<password>[^\s/?#'\"\\<>]+)@",
        group="password",
        bounded=False,
        check=lambda m: not is_placeholder(m.group("password")),
    ),
)


# -- values: what a real credential looks like -----------------------------------------------------

_PLACEHOLDER_WORDS = frozenset(
    """none null nil true false undefined empty required optional string str int bool bytes any
    secret secrets password passwd pass token key apikey api_key changeme change_me example
    sample dummy placeholder redacted hidden masked todo tbd xxx test default value env""".split()  # noqa: SIM905
)
_PLACEHOLDER_STARTS = (
    "your", "my-", "my_", "<", "${", "$(", "{{", "%(", "example", "placeholder", "changeme",
    "replace", "insert", "enter", "put_", "put-", "***", "...",
)  # fmt: skip
_READABLE_DUMMY = re.compile(
    r"(?=.*(?:test|dummy|fake|example|sample|secret|key|password|insecure|dev|local|foo|bar))"
    r"[a-z]+(?:[-_ ][a-z]+)*"
)  # 'test-secret-key', 'dev_password': a test setting, not a credential
_PARENTHESISED_WORDS = re.compile(r"\([a-z ]*\)?")  # (sensitive value), (none)
_MASK_CHARS = frozenset("x*-_. ")  # xxxx-xxxx, ****, ...
_DOTTED_NAME = re.compile(r"[A-Za-z_]+(?:\.[A-Za-z_]+)+")
_IDENTIFIER = re.compile(r"[A-Za-z_]+")
_PATH = re.compile(r"~?/[^/\s]+/")  # /home/dev/…, ~/.ssh/…: a file, not its content
RANDOM_VALUE_MIN = 16
"""Characters a token or key needs before a keyword alone (``*_TOKEN=``, ``api_key:``) marks it
as a credential: tokens are at least this long, and short values there are ids and names."""
RANDOM_LETTERS_MIN = 24
"""Characters a token or key without a digit needs (in mixed case) to look random."""
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9+/=_\-~][A-Za-z0-9+/=_\-.~]*")  # base64(url), hex, JWT
PASSWORD_MIN = 4
"""Characters a password or secret needs (a shorter value is a placeholder or an example)."""


def is_placeholder(value: str) -> bool:
    """True for a value that stands for a secret without being one (``${DB_PASSWORD}``,
    ``<token>``, ``changeme``, ``****``, an already redacted value)."""
    lower = value.lower()
    return (
        is_marker(value)
        or lower in _PLACEHOLDER_WORDS
        or lower.startswith(_PLACEHOLDER_STARTS)
        or "${" in value
        or lower.endswith("...")
        or set(lower) <= _MASK_CHARS
        or _PARENTHESISED_WORDS.fullmatch(lower) is not None
        or _READABLE_DUMMY.fullmatch(value) is not None
    )


def _looks_random(value: str) -> bool:
    """A token's or key's value: long, without spaces, and of at least two kinds of character
    (letters and digits, or both cases), as random strings of that length almost always are."""
    if len(value) < RANDOM_VALUE_MIN or not _TOKEN_CHARS.fullmatch(value):
        return False  # short, or prose, code, a path, a cache key (user:178:profile), a URL
    digits = any(c.isdigit() for c in value)
    letters = any(c.isalpha() for c in value)
    mixed_case = any(c.isupper() for c in value) and any(c.islower() for c in value)
    return (digits and letters) or (mixed_case and len(value) >= RANDOM_LETTERS_MIN)


def value_is_secret(value: str, kind: str, *, quoted: bool, env_style: bool) -> bool:
    """Whether ``value``, assigned to a name of ``kind``, is a credential.

    ``quoted`` values are literals; bare ones may be code (``password = user.password``).
    ``env_style`` is an upper-case name with ``=`` and no spaces (``DB_PASSWORD=…``), where any
    value is a literal.
    """
    value = value.strip()
    if not value or is_placeholder(value) or _PATH.match(value):
        return False
    if not quoted and _DOTTED_NAME.fullmatch(value):
        return False  # code: an attribute (settings.API_TOKEN), not a literal
    if kind in ("token", "key"):
        return _looks_random(value)
    if len(value) < PASSWORD_MIN:
        return False
    if quoted or env_style:
        return True
    return not _IDENTIFIER.fullmatch(value)  # a bare word is a variable: code


# -- names: what announces a credential ------------------------------------------------------------

_NAME_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_PASSWORD_WORDS = ("password", "passwd", "passphrase", "passcode", "pwd")
_KEY_WORDS = frozenset(
    """key apikey privatekey secretkey accesskey masterkey signingkey encryptionkey
    licensekey""".split()  # noqa: SIM905
)
_AFTER_KEY = frozenset(["data", "value", "b64", "base64", "pem", "content", "material"])
_NOT_A_SECRET = frozenset(
    """id ids type types url urls uri endpoint host port user username email file files path
    paths dir name names count counts len length size limit max min ttl expiry expires expire
    expiration at header headers prefix suffix format field fields policy hash hashed digest env
    var vars ref arn version mode timeout hint pattern regex strength provider store location
    enabled disabled required source kind label days rotation scope scopes algorithm alg method
    fingerprint index template validator validation reset created updated cache manager helper
    class usage budget estimate counter encoding encoder decoder placeholder question prompt
    input form""".split()  # noqa: SIM905
)


@functools.lru_cache(maxsize=4096)  # the same keys recur in every stored state and event
def name_kind(name: str) -> str | None:
    """The kind of credential a variable, key or flag name announces (``password``,
    ``secret``, ``token``, ``key``), or None (``max_tokens``, ``key_id``, ``password_hash``)."""
    parts = [p.lower() for p in _NAME_PARTS.findall(name)]
    if not parts or parts[-1] in _NOT_A_SECRET or parts in (["pwd"], ["oldpwd"]):
        return None  # $PWD and $OLDPWD are the shell's folders
    found: set[str] = set()
    for index, part in enumerate(parts):
        if part.endswith(_PASSWORD_WORDS) or (part == "pass" and index == len(parts) - 1 > 0):
            found.add("password")
        elif part in ("credential", "credentials", "creds") or part.endswith("secret"):
            found.add("secret")
        elif part.endswith("token") or (part == "auth" and index == len(parts) - 1):
            found.add("token")
        elif part in _KEY_WORDS and all(p in _AFTER_KEY for p in parts[index + 1 :]):
            found.add("key")
    return next((k for k in ("password", "secret", "token", "key") if k in found), None)


# -- word rules ------------------------------------------------------------------------------------

_CALL = re.compile(r"[A-Za-z_.]{2,}\([A-Za-z_.,]*\)?")  # getpass(), os.getenv(…
_IDENT_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_ASSIGNMENT = re.compile(
    r"(?P<name>[A-Za-z0-9_.\-]{1,100})"
    r"(?:\\?[\"'`])?\]?"  # the closing quote of a key ("password": …), or x["password"]
    r"(?P<sep>[ \t]*(?::=|=>|[:=](?!=))[ \t]*|[ \t]+)"  # := => = : or blanks (a CLI flag)
    r"(?:(?P<open>\\?[\"'`])(?P<quoted>[^\"'`\\\r\n]{1,512})(?P=open)"
    r"|(?P<bare>[^\s\"'`\\,;&|<>{}\[\]]{1,512}))"
)


@dataclass(frozen=True)
class WordRule:
    """A credential announced by a (lower-case) ``word``: ``find`` gives the span to redact
    for an occurrence of the word at an index, or None."""

    word: str
    find: Callable[[str, int], Span | None]


def _assignment_at(text: str, index: int) -> Span | None:
    """``NAME = value`` (and ``"name": "value"``, ``--flag value``) around a credential word at
    ``index``: the value's span when the name announces a credential and the value is one."""
    start = index
    while start > 0 and text[start - 1] in _IDENT_CHARS:
        start -= 1
    if text.endswith(MARKER_PREFIX, 0, start):
        return None  # the kind inside a marker
    match = _ASSIGNMENT.match(text, start)
    if match is None or match.end("name") <= index:
        return None
    name = match.group("name").lstrip(".")
    separator = match.group("sep")
    if not separator.strip() and not name.startswith("-"):
        return None  # "the password is ..." is prose; "--password x" is a flag
    kind = name_kind(name)
    if kind is None or name.lower() == "authorization":
        return None
    quoted = match.group("quoted") is not None
    group = "quoted" if quoted else "bare"
    start, end = match.span(group)
    if not quoted:
        if _CALL.fullmatch(text, start, end) or text[end : end + 1] == "[":
            return None  # a call or an index: code
        while end > start and (
            text[end - 1] == ":"
            or (text[end - 1] == ")" and text.count(")", start, end) > text.count("(", start, end))
        ):
            end -= 1  # the closing parenthesis of a call around the assignment, a colon after
    env_style = separator == "=" and name.isupper()
    if not value_is_secret(text[start:end], kind, quoted=quoted, env_style=env_style):
        return None
    return start, end, kind


def _match_rule(
    pattern: str, group: str, kind: str, check: Callable[[str], bool] | None = None
) -> Callable[[str, int], Span | None]:
    compiled = re.compile(pattern, re.IGNORECASE)

    def find(text: str, index: int) -> Span | None:
        match = compiled.match(text, index)
        if match is None or not _starts_token(text, index, _ALNUM):
            return None
        value = match.group(group)
        if is_marker(value) or (check is not None and not check(value)):
            return None
        return match.start(group), match.end(group), kind

    return find


def _scheme_or_long(value: str) -> bool:
    return len(value) >= 8 and any(c.isdigit() for c in value)


WORD_RULES: tuple[WordRule, ...] = (
    *(
        WordRule(word, _assignment_at)
        for word in ("pass", "pwd", "secret", "token", "key", "auth", "cred")
    ),
    # Authorization headers: the header name and scheme stay so the text still reads.
    WordRule(
        "authorization",
        _match_rule(
            r"authorization(?:\\?[\"'])?[ \t]*[:=][ \t]*(?:\\?[\"'])?"
            r"(?:bearer|basic|token|bot|apikey|sso-key)[ \t]+(?P<credential>[^\s\"'\\,]{4,})",
            "credential",
            "authorization",
            lambda v: not is_placeholder(v),
        ),
    ),
    WordRule(
        "authorization",
        _match_rule(
            r"authorization(?:\\?[\"'])?[ \t]*[:=][ \t]*(?:\\?[\"'])?"
            r"(?P<credential>[^\s\"'\\,]{8,})",
            "credential",
            "authorization",
            _scheme_or_long,
        ),
    ),
    # Prose says "bearer" too ("the bearer instruments"): a token holds a digit.
    WordRule(
        "bearer",
        _match_rule(
            r"bearer[ \t]+(?P<token>(?=[A-Za-z._~+/=\-]*[0-9])[A-Za-z0-9._~+/=\-]{8,})",
            "token",
            "bearer-token",
        ),
    ),
    # mysql -pSECRET (the password glued to -p; "-p" alone asks for it)
    WordRule(
        "mysql",
        _match_rule(
            r"mysql(?:dump|admin|sh|import)?\b[^\n;|&]*?[ \t]-p(?P<password>[^\s'\"\\;|&]+)",
            "password",
            "password",
            lambda v: not is_placeholder(v),
        ),
    ),
    # curl -u user:password, --user user:password
    WordRule(
        "curl",
        _match_rule(
            r"curl\b[^\n|;&]*?[ \t](?:-u|--user)[ \t=]+['\"]?[A-Za-z0-9._@\-]+:"
            r"(?P<password>[^\s'\"\\@]+)",
            "password",
            "password",
            lambda v: not is_placeholder(v),
        ),
    ),
    # ~/.netrc: machine HOST login USER password SECRET
    WordRule(
        "machine",
        _match_rule(
            r"machine[ \t]+[^\s\\]+(?:(?:\s|\\[nrt])+login[ \t]+[^\s\\]+)?(?:\s|\\[nrt])+"
            r"password[ \t]+(?P<password>[^\s\"'\\]+)",
            "password",
            "password",
            lambda v: not is_placeholder(v),
        ),
    ),
)
