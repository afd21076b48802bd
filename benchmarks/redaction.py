"""Secret redaction: recall on a generated corpus, false positives on ordinary text, cost per MB;
ours (:mod:`contextfold.redaction.redactor`) beside ``detect-secrets`` in the same run.

- corpus: :mod:`benchmarks.secret_corpus` generates samples of every secret format it knows
  (113: vendor tokens, AWS credentials files and session tokens, database URLs, ``.env`` lines,
  JWTs, PEM keys cut at either end, a GCP service-account file...), each as a tool, a config
  file or a user would show it. A secret counts as redacted when neither its value nor any
  distinctive fragment (12 characters of its random body, start, middle and end of each line)
  is left.
- ordinary texts: :mod:`benchmarks.ordinary_texts`, 50 texts full of secret-like strings
  (git SHAs, UUIDs, base64 fixtures, hex hashes, minified JavaScript, lockfile integrity hashes,
  placeholders, code that handles passwords, public keys). A text changed (ours) or with any
  finding (detect-secrets) is a false positive.
- detect-secrets 1.5.0 with every plugin and its default filters (``default_settings``), as
  ``detect-secrets scan`` runs, on each text saved as ``output.txt`` (agent text has no file
  type). It reports findings, not redactions: "redacted" replaces each reported value in the
  text and then looks for what is left, the way a redactor built on it would; "flagged" counts
  a secret whose lines hold any finding.
- cost: seconds per MB of text, on the corpus and the ordinary texts joined (mostly secrets)
  and on the ordinary texts alone (the common case: nothing to redact); with ``../shared/data``,
  also on every string of the real agent transcripts, with the redactions made there (each a
  false positive, unless a transcript holds a real secret).

Targets (issue 14): recall >= 98 % on at least 60 formats; at most 1 false positive in 50 ordinary
texts.

Run: ``python -m benchmarks.redaction [--quick] [--write]`` (quick: one sample a format, a smaller
cost sample, no real transcripts; nothing written unless ``--write``).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._results import (
    TRAJECTORIES,
    benchmark_arguments,
    markdown_table,
    record_targets,
    should_write,
    target,
    write_section,
)
from benchmarks.ordinary_texts import ORDINARY_COUNT, ordinary_texts
from benchmarks.secret_corpus import FORMATS, SecretSample, every_secret, leaks, secret_samples
from contextfold.redaction.redactor import redact_text

RECALL_TARGET = 0.98
FALSE_POSITIVES_ALLOWED = 1
"""Targets (issue 14): recall >= 98 %; at most 1 false positive in the 50 ordinary texts."""
SEED = 14
PER_FORMAT = 10
COST_MB = 1.0
"""Text timed for the cost per MB (ours); detect-secrets gets :data:`DETECT_SECRETS_COST_MB`."""
DETECT_SECRETS_COST_MB = 0.1
SCAN_FILE = "output.txt"
FILE_TYPES = (SCAN_FILE, ".env", "config.yaml", "settings.py", "config.json", "main.go")
"""The names detect-secrets also scans each text under, to give its file-type rules (keyword
patterns differ by type) every chance: the union of their findings is its second row."""
MARKER = "[REDACTED]"


@dataclass
class Measured:
    """One redactor's figures on the corpus and the ordinary texts."""

    name: str
    secrets: int = 0
    redacted: int = 0
    flagged: int = 0
    false_positives: list[int] = field(default_factory=list)
    missed: Counter[str] = field(default_factory=Counter)
    seconds_per_mb: dict[str, float] = field(default_factory=dict)

    @property
    def recall(self) -> float:
        return self.redacted / self.secrets if self.secrets else 0.0


# -- the redactors ---------------------------------------------------------------------------------


class DetectSecrets:
    """detect-secrets as ``detect-secrets scan`` runs it, on texts saved to scratch files named
    ``names`` (the findings of all of them together)."""

    def __init__(self, names: Sequence[str] = (SCAN_FILE,)) -> None:
        from detect_secrets import SecretsCollection
        from detect_secrets.settings import default_settings

        self._collection = SecretsCollection
        self._settings = default_settings()
        self._settings.__enter__()
        self._folder = tempfile.TemporaryDirectory()
        self.paths = [Path(self._folder.name) / name for name in names]

    def findings(self, text: str) -> list[tuple[int, str]]:
        """``(line number, reported value)`` for every finding in ``text``."""
        found = []
        for path in self.paths:
            path.write_text(text, encoding="utf-8")
            collection = self._collection()
            collection.scan_file(str(path))
            found += [(s.line_number, s.secret_value or "") for _, s in collection]
        return found

    def redact(self, text: str) -> tuple[str, set[int]]:
        """``text`` with every reported value replaced, and the lines that held a finding."""
        found = self.findings(text)
        for value in sorted({v for _, v in found if v}, key=len, reverse=True):
            text = text.replace(value, MARKER)
        return text, {line for line, _ in found}

    def close(self) -> None:
        self._settings.__exit__(None, None, None)
        self._folder.cleanup()


def _detect_secrets(names: Sequence[str]) -> DetectSecrets | None:
    try:
        return DetectSecrets(names)
    except ImportError:
        return None


def _secret_lines(sample: SecretSample, value: str) -> set[int]:
    """The 1-based line numbers of ``sample.text`` that ``value`` spans."""
    start = sample.text.find(value)
    if start < 0:
        return set()
    first = sample.text.count("\n", 0, start) + 1
    return set(range(first, first + value.count("\n") + 1))


def measure_ours(samples: list[SecretSample], ordinary: list[str]) -> Measured:
    result = Measured("contextfold.redaction.redactor")
    outputs = {id(s): redact_text(s.text) for s in samples}
    for sample, secret in every_secret(samples):
        result.secrets += 1
        if leaks(secret, outputs[id(sample)]) is None:
            result.redacted += 1
            result.flagged += 1
        else:
            result.missed[sample.format] += 1
    result.false_positives = [i for i, t in enumerate(ordinary) if redact_text(t) != t]
    return result


def measure_detect_secrets(
    name: str, scanner: DetectSecrets, samples: list[SecretSample], ordinary: list[str]
) -> Measured:
    result = Measured(name)
    redacted = {id(s): scanner.redact(s.text) for s in samples}
    for sample, secret in every_secret(samples):
        text, lines = redacted[id(sample)]
        result.secrets += 1
        result.flagged += bool(lines & _secret_lines(sample, secret.value))
        if leaks(secret, text) is None:
            result.redacted += 1
        else:
            result.missed[sample.format] += 1
    result.false_positives = [i for i, t in enumerate(ordinary) if scanner.findings(t)]
    return result


# -- cost ------------------------------------------------------------------------------------------


def _text_of_size(pieces: Sequence[str], megabytes: float) -> str:
    """``pieces`` joined by blank lines, repeated until the text is ``megabytes`` long."""
    out: list[str] = []
    size = 0
    while size < megabytes * 1e6:
        for piece in pieces:
            out.append(piece)
            size += len(piece) + 2
    return "\n\n".join(out)[: int(megabytes * 1e6)]


def seconds_per_mb(redact: Callable[[str], object], texts: Sequence[str]) -> float:
    """The best of three timings of redacting every text, per MB of text."""
    size = sum(len(t) for t in texts)
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for text in texts:
            redact(text)
        best = min(best, time.perf_counter() - started)
    return best / (size / 1e6)


def _chunks(text: str, size: int = 8_000) -> list[str]:
    """``text`` cut into tool-output-sized pieces (what the store redacts one at a time)."""
    return [text[i : i + size] for i in range(0, len(text), size)]


def real_transcript_strings() -> Iterator[str]:
    """Every string of the shared agent transcripts (messages, tool calls, outputs)."""

    def strings(value: Any) -> Iterator[str]:
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            for item in value.values():
                yield from strings(item)
        elif isinstance(value, list):
            for item in value:
                yield from strings(item)

    for path in sorted(TRAJECTORIES.rglob("*.json*")):
        if path.suffix == ".jsonl":
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    yield from strings(json.loads(line))
        else:
            yield from strings(json.loads(path.read_text(encoding="utf-8")))


# -- report ----------------------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms" if seconds < 10 else f"{seconds:,.0f} s"


def main(argv: Sequence[str] | None = None) -> None:
    parser = benchmark_arguments(__doc__.splitlines()[0])
    args = parser.parse_args(argv)
    per_format = 1 if args.quick else PER_FORMAT
    samples = secret_samples(SEED, per_format)
    ordinary = ordinary_texts(SEED)
    mixed = _text_of_size([s.text for s in samples] + ordinary, 0.1 if args.quick else COST_MB)
    clean = _text_of_size(ordinary, 0.1 if args.quick else COST_MB)

    ours = measure_ours(samples, ordinary)
    ours.seconds_per_mb["mixed"] = seconds_per_mb(redact_text, _chunks(mixed))
    ours.seconds_per_mb["clean"] = seconds_per_mb(redact_text, _chunks(clean))
    measured = [ours]
    variants = [(f"detect-secrets 1.5.0, as {SCAN_FILE}", (SCAN_FILE,))]
    if not args.quick:
        variants.append(
            (f"detect-secrets 1.5.0, as any of {len(FILE_TYPES)} file types", FILE_TYPES)
        )
    for name, names in variants:
        scanner = _detect_secrets(names)
        if scanner is None:
            break
        try:
            theirs = measure_detect_secrets(name, scanner, samples, ordinary)
            cost_size = 0.01 if args.quick else DETECT_SECRETS_COST_MB
            for label, text in (("mixed", mixed), ("clean", clean)):
                piece = text[: int(cost_size * 1e6)]
                theirs.seconds_per_mb[label] = seconds_per_mb(scanner.findings, [piece])
            measured.append(theirs)
        finally:
            scanner.close()

    real_note = ""
    if not args.quick and TRAJECTORIES.exists():
        real = list(real_transcript_strings())
        changed = sum(1 for text in real if redact_text(text) != text)
        ours.seconds_per_mb["real"] = seconds_per_mb(redact_text, real)
        size = sum(len(t) for t in real) / 1e6
        real_note = (
            f"\n\nOn the real agent transcripts of `../shared/data` ({len(real):,} strings, "
            f"{size:,.1f} MB): {changed} strings changed by our redaction (each a false "
            f"positive unless a transcript holds a real secret), at "
            f"{_ms(ours.seconds_per_mb['real'])} per MB."
        )

    secrets_count = ours.secrets
    rows = [
        (
            m.name,
            f"{m.redacted:,} / {m.secrets:,} ({m.recall:.1%})",
            f"{m.flagged:,} ({m.flagged / m.secrets:.1%})",
            f"{len(m.false_positives)} of {ORDINARY_COUNT}",
            _ms(m.seconds_per_mb.get("mixed", 0.0)),
            _ms(m.seconds_per_mb.get("clean", 0.0)),
        )
        for m in measured
    ]
    table = markdown_table(
        (
            "redactor",
            "secrets redacted (recall)",
            "secrets flagged",
            "false positives",
            "cost per MB, corpus",
            "cost per MB, ordinary text",
        ),
        rows,
    )
    missed_formats = sorted(set().union(*(m.missed for m in measured)))
    misses = markdown_table(
        ("format", *(m.name for m in measured)),
        [
            (name, *(f"{m.missed[name]} of {_secrets_in(samples, name)}" for m in measured))
            for name in missed_formats
        ],
    )
    print(table, misses if missed_formats else "no format missed", real_note, sep="\n\n")
    if not should_write(args):
        return

    recall_met = ours.recall >= RECALL_TARGET and len(FORMATS) >= 60
    fp_met = len(ours.false_positives) <= FALSE_POSITIVES_ALLOWED
    peers = measured[1:]
    best_recall = max(peers, key=lambda m: m.recall, default=None)
    fewest_false = min(peers, key=lambda m: len(m.false_positives), default=None)
    targets = [
        target(
            "redaction",
            f"recall ≥ {RECALL_TARGET:.0%} on ≥ 60 secret formats",
            f"{ours.recall:.1%} ({ours.redacted:,} of {secrets_count:,} secrets, "
            f"{len(FORMATS)} formats)",
            recall_met,
            versus=f"{best_recall.name}: {best_recall.recall:.1%} redacted, "
            f"{best_recall.flagged / best_recall.secrets:.1%} flagged"
            if best_recall
            else "detect-secrets not installed",
            held_back="" if recall_met else f"missed formats: {', '.join(sorted(ours.missed))}",
        ),
        target(
            "redaction",
            f"≤ {FALSE_POSITIVES_ALLOWED} false positive in {ORDINARY_COUNT} ordinary texts",
            f"{len(ours.false_positives)} of {ORDINARY_COUNT}",
            fp_met,
            versus=f"{fewest_false.name}: {len(fewest_false.false_positives)} of {ORDINARY_COUNT}"
            if fewest_false
            else "detect-secrets not installed",
            held_back="" if fp_met else f"changed texts: {ours.false_positives}",
        ),
    ]
    method = (
        f"`python -m benchmarks.redaction{' --quick' if args.quick else ''}`: {len(FORMATS)} "
        f"secret formats, {per_format} generated sample(s) of each ({len(samples):,} texts, "
        f"{secrets_count:,} secrets), and {ORDINARY_COUNT} ordinary texts "
        "(`benchmarks/secret_corpus.py`, `benchmarks/ordinary_texts.py`; random secrets of "
        "the right shapes, never real ones). A secret is redacted when neither its value nor "
        "any 12-character fragment of its random body is left; *flagged* (detect-secrets) when "
        "a finding falls on its lines. detect-secrets runs every plugin with its default filters "
        f"on each text saved as `{SCAN_FILE}` (agent text has no file type)"
        + (
            f", and, in a second row, under each of {', '.join(f'`{n}`' for n in FILE_TYPES)} "
            "(its keyword rules depend on the file type; the union of the findings)"
            if len(measured) > 2
            else ""
        )
        + "; its redaction replaces each value it reports. "
        "Cost: best of 3 over the corpus and ordinary texts joined (in 8 kB pieces, as the "
        f"store redacts tool outputs) and over the ordinary texts alone; detect-secrets on "
        f"{DETECT_SECRETS_COST_MB:g} MB of each."
    )
    body = f"{method}\n\n{table}" + (
        f"\n\nFormats with a secret left:\n\n{misses}" if missed_formats else ""
    )
    write_section("redaction", "Secret redaction", body + real_note, quick=args.quick)
    record_targets(
        "redaction",
        targets,
        {
            m.name: {
                "recall": m.recall,
                "flagged": m.flagged / m.secrets,
                "false_positives": len(m.false_positives),
                "seconds_per_mb": m.seconds_per_mb,
            }
            for m in measured
        },
        quick=args.quick,
    )


def _secrets_in(samples: list[SecretSample], name: str) -> int:
    return sum(len(s.secrets) for s in samples if s.format == name)


if __name__ == "__main__":
    main()
