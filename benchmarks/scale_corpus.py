"""Write a large synthetic corpus for the scale run, grown from real passages.

Usage::

    python benchmarks/scale_corpus.py --out /tmp/scale60k.json --n 60000 \
        ../shared/bench/2wikimultihopqa/2wiki_corpus.json \
        ../shared/bench/musique/musique100_corpus.json \
        ../shared/bench/hotpotqa/hotpotqa100_corpus.json

How: the distinct passages of the given corpora (2Wiki 6,119 + MuSiQue 1,890 +
HotpotQA 994 title-sentence lists, about 9k in all) are taken once as they are,
then again in "copies" until ``--n`` passages are written. In copy ``c`` every
proper-noun word (a capitalised word whose lower-case form never occurs in the
corpora, so "The" and "In" stay) gets the suffix ``SUFFIXES[c]`` in the title and
the text alike: "Marie Curie was born in Warsaw" becomes "Mariova Curieova was
born in Warsawova". Each copy is thus a parallel corpus with its own entities
and the same link structure, so entity, relation and community counts grow with
the passage count as they would for a real corpus of that size, instead of a
repeated passage folding into the entities already seen. Sentences, grammar and
lengths are the originals', which keeps the parse and encoder costs per passage
those of real text. The output is ``[{"title", "text"}]``, what ``kgrag ingest``
reads. The source corpora's licences (see ../shared/bench/README.md) carry over;
the file is a benchmark input and is not committed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

SUFFIXES = ("", "ova", "eth", "ando", "irk", "usk", "elle", "ambe", "oriz", "yne", "ault", "imov")
_WORD = re.compile(r"\b[A-Z][a-z]+\b")
_LOWER = re.compile(r"\b[a-z]+\b")


def read_passages(path: Path) -> list[tuple[str, str]]:
    """(title, text) pairs of a corpus: a list of {title, text} or a title -> sentences map."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict):
        return [(t, "".join(s) if isinstance(s, list) else str(s)) for t, s in data.items()]
    return [(str(d.get("title", "")), str(d["text"])) for d in data]


def copy_namer(common: set[str], suffix: str):  # type: ignore[no-untyped-def]
    """A function renaming the proper-noun words of a text with ``suffix``."""

    def rename(match: re.Match[str]) -> str:
        word = match.group(0)
        return word if word.lower() in common else word + suffix

    return lambda text: _WORD.sub(rename, text) if suffix else text


def build(passages: list[tuple[str, str]], n: int) -> list[dict[str, str]]:
    base = list(dict.fromkeys(p for p in passages if p[1].strip()))
    common = {w for _, text in base for w in _LOWER.findall(text)}
    out: list[dict[str, str]] = []
    for suffix in SUFFIXES:
        rename = copy_namer(common, suffix)
        for title, text in base:
            if len(out) == n:
                return out
            out.append({"title": rename(title), "text": rename(text)})
    if len(out) < n:
        sys.exit(f"only {len(out)} passages: give more source corpora or add suffixes")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpora", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--n", type=int, default=60000)
    args = ap.parse_args()
    passages = [p for path in args.corpora for p in read_passages(path)]
    corpus = build(passages, args.n)
    args.out.write_text(json.dumps(corpus, ensure_ascii=False), encoding="utf-8")
    print(f"{len(corpus)} passages from {len(passages)} source passages -> {args.out}")


if __name__ == "__main__":
    main()
