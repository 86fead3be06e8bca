"""The project speaks only of itself: no file names the work that made it (rounds, stops,
numbered issues). Docs say how things are; history is git's."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: How the work was organised, which no reader of the project can look up (the words are
#: joined here so that this file does not say them itself).
_WORDS = ("st" "op", "ro" "und", "is" "sue")
WORK_TALK = re.compile("|".join((
    *(rf"\b{word}[ -]\d+\b" for word in _WORDS), r"\[\d+[a-z]? of \d+\]",
    r"\b(?:this|last) " + _WORDS[1] + r"\b", r"\bby the " + "le" "ad" + r"\b")), re.IGNORECASE)


def test_no_file_speaks_of_stops_rounds_or_issue_numbers() -> None:
    tracked = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout
    found = []
    for name in tracked.splitlines():
        path = ROOT / name
        if path.suffix not in {".py", ".md", ".sh", ".toml", ".js", ".json", ".html", ".css"} \
                or "node_modules" in path.parts or not path.is_file():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if WORK_TALK.search(line):
                found.append(f"{name}:{number}: {line.strip()}")
    assert not found, "\n".join(found)
