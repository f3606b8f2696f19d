"""``meaning``'s masking, written for speed (``_VOLATILE``: ``re`` never stops inside a word),
gives the same bytes as the plain pattern it replaced, kept here as the oracle: its text is a
copy of ``_VOLATILE`` as it was before (what every store's ``meaning_key`` and error hashes were
computed with), applied by ``sub`` the way ``_masked`` applied it. Checked on generated texts
made of what the rules read (digits, hex letters, ``0x``, ``tmp``, ``/var/folders/``, ids,
timestamps, separators, a redaction placeholder, bytes outside ASCII) and on every text of the
real samples (each string of each JSON record, and each line as it is)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

import orjson
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from analyzer.ingest import meaning
from tests.helpers import shared_samples

# The oracle: ``_VOLATILE`` before it was rewritten for speed, copied unchanged.
ORACLE = re.compile(
    rb"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)?"  # a timestamp
    rb"|\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"  # UUID
    rb"|\b0x[0-9a-fA-F]+\b|\b(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{7,}\b"  # address, hex digest
    rb"|\btmp[A-Za-z0-9_]{6,}"  # a temporary name (Python's tempfile: tmpk2j3_x8a)
    rb"|/var/folders/[^/\s'\"]+/[^/\s'\"]+"  # macOS's per-user temporary folder
    # a provider's id (toolu_01A..., call_..., chatcmpl-...): 16 or more letters and digits,
    # two of them digits
    rb"|\b(?:[a-z]+[_-])?(?=[A-Za-z0-9]*\d[A-Za-z0-9]*\d)(?=[A-Za-z0-9]*[A-Za-z])"
    rb"[A-Za-z0-9]{16,}\b"
    rb"|\d+"  # numbers: counts, line numbers, ports, pids, durations
)
STANDS_FOR = re.compile(meaning._STANDS_FOR)


def oracle_masked(data: bytes) -> bytes:
    """``_masked`` as it was: the oracle pattern, placeholders kept whole."""
    if b"REDACTED" not in data:
        return ORACLE.sub(b"#", data)
    kept = STANDS_FOR.findall(data)
    masked = [ORACLE.sub(b"#", part) for part in STANDS_FOR.split(data)]
    return b"".join(m + k for m, k in zip(masked, [*kept, b""], strict=True))


def test_the_oracle_is_the_pattern_each_rule_names() -> None:
    """The oracle masks what the rules say (so a wrong copy of it would be seen)."""
    said = b"at 2026-01-02T03:04:05.123+01:00 id 0a1b2c3d-4e5f-6789-abcd-ef0123456789 in "
    said += b"/tmp/tmpk2j3_x8a and /var/folders/ab/cd/x, 0x7ffe, deadbee5 "
    said += b"toolu_01AbCdEfGh2345678xyz"
    assert oracle_masked(said) == b"at # id # in /tmp/# and #/x, #, # #"
    assert oracle_masked(said) == meaning._masked(said)


# What the rules read: each drawn text is a run of these.
PIECES = [
    *(bytes([c]) for c in b"0123456789abcdefABCDEFxXtmpgzQ_-:TZ+./ \n\t'\"[]="),
    b"0x",
    b"tmp",
    b"/var/folders/",
    b"toolu_",
    b"call-",
    b"2026-01-02",
    b"T03:04:05",
    b" 12:30",
    b"deadbeef",
    b"0a1b2c3d-",
    b"[REDACTED_OUTPUT len=5 sha=ab12cd34]",
    b"REDACTED",
    "é".encode(),
    "日本".encode(),
    b"\xff\x00",
]


@settings(
    max_examples=3000,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.lists(st.sampled_from(PIECES), max_size=60).map(b"".join))
def test_masking_is_the_oracles_on_generated_texts(text: bytes) -> None:
    assert meaning._masked(text) == oracle_masked(text)


def test_masking_is_the_oracles_on_chosen_texts() -> None:
    """Edges of the rewrite: a match at the text's start and end, matches side by side, a
    timestamp cut short before a digit, a word that only looks like an id."""
    for text in [
        b"",
        b"7",
        b"deadbeef1",
        b"tmpabcdef",
        b"x" * 3000,
        b"a1" * 40,
        b"2026-01-02T03:045",
        b"2026-01-02 03:04:05Z9 x",
        b"/var/folders/ab/cd.0x1f/tmpabcdef12",
        b"a/var/folders/x/y,z toolu_01AbCdEfGh2345678xyz_",
        b"_deadbeef1 -deadbeef1 =0x1f 0x1fg 0x",
        b"abcdefabcdefabcdefab-1 abcdefab-abcd-abcd-abcd-abcdefabcdef",
        b"call-abc_def1234567890123456 chatcmpl-AbC1dEf2GhIjKlMnOpQ",
        b"\xc3\xa9123\xc3\xa9deadbeef1\xff0x1",
    ]:
        assert meaning._masked(text) == oracle_masked(text), text


def real_texts() -> Iterator[bytes]:
    """Every line of every sample file, and every string of each of its JSON records."""
    for path in sorted(shared_samples().rglob("*")):
        if not path.is_file() or path.suffix not in {".jsonl", ".json", ".traj", ".csv", ".md"}:
            continue
        for line in path.read_bytes().splitlines():
            yield line
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            yield from strings_in(record)
        if path.suffix in {".json", ".traj"}:
            with contextlib.suppress(orjson.JSONDecodeError):
                yield from strings_in(orjson.loads(path.read_bytes()))


def strings_in(value: object) -> Iterator[bytes]:
    if isinstance(value, str):
        yield value.encode("utf-8", "surrogatepass")
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)


def test_masking_is_the_oracles_on_every_real_text() -> None:
    """Each text as ``meaning_key`` reads it (its head and tail), each one once."""
    texts = {meaning._sample(text, meaning.MEANING_SAMPLE) for text in real_texts()}
    for text in texts:
        assert meaning._masked(text) == oracle_masked(text), text[:300]
    assert len(texts) > 100_000, len(texts)  # (the samples were read: 57 MB of them)


def test_a_word_at_the_start_and_a_number_inside_a_word() -> None:
    """The rewrite reads a word's start from the byte before it: at the text's start too."""
    assert meaning.mask(b"deadbeef1 x") == b"# x"
    assert meaning.mask(b"ab12cd x") == b"ab#cd x"
    assert meaning.mask(Path("/tmp/tmpk2j3_x8a/out").as_posix().encode()) == b"/tmp/#/out"
