"""Reading documents, measured: how much recall survives when a corpus arrives as PDF or
Word files instead of JSON records, and how fast PDFs are read against ``pdftotext``.

    # 1. render the 2Wiki corpus as HTML (60 passages a file, each under its title as
    #    a heading) and convert it with LibreOffice (Debian's libreoffice-writer-nogui)
    python benchmarks/documents_bench.py render \\
        --corpus ../shared/bench/2wikimultihopqa/2wiki_corpus.json --out /tmp/2wiki-docs
    # 2. build a graph from each format, as a user would
    kgrag ingest /tmp/2wiki-docs/pdf --graph graphs/2wiki-pdf
    kgrag ingest ../shared/bench/2wikimultihopqa/2wiki_corpus.json --graph graphs/2wiki
    # 3. dense and local R@2 / R@5 on the 180 dev questions, each hit scored by the
    #    passage its chunk came from (the section it sits under, else its document)
    python benchmarks/documents_bench.py recall --graph graphs/2wiki-pdf \\
        --corpus ../shared/bench/2wikimultihopqa/2wiki_corpus.json \\
        --questions ../shared/bench/2wikimultihopqa/2wiki_dev180.json
    # 4. pages a second: kgrag's PDF reader against pdftotext -layout, same files, same run
    python benchmarks/documents_bench.py speed /tmp/2wiki-docs/pdf/*.pdf
    # 4b. dense recall under each form of a chunk's context (re-embeds the chunks): on
    #     2Wiki by passage, on a manual by page (benchmarks/manuals_bench.py's files)
    python benchmarks/documents_bench.py recontext --graph graphs/2wiki-pdf \\
        --corpus ../shared/bench/2wikimultihopqa/2wiki_corpus.json \\
        --questions ../shared/bench/2wikimultihopqa/2wiki_dev180.json
    python benchmarks/documents_bench.py recontext --graph graphs/manuals-dev \\
        --questions benchmarks/data/manuals_dev.json
    # 5. how the PDF reader was chosen: word F1 against pdftotext -layout, pages a second
    python benchmarks/documents_bench.py parsers /usr/share/doc/gnuplot/gnuplot.pdf
    # 6. and the OCR engine: word F1 on a scanned page whose words are known
    python benchmarks/documents_bench.py ocr tests/data/docs/scan.png --reference WORDS.txt

Nothing here downloads anything; LibreOffice and poppler-utils are needed for steps 1
and 4 only (they are not dependencies of kgrag).
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def render(corpus: Path, out: Path, per: int, formats: list[str]) -> None:
    passages = json.loads(corpus.read_text(encoding="utf-8"))
    (out / "html").mkdir(parents=True, exist_ok=True)
    names = []
    for n, first in enumerate(range(0, len(passages), per), start=1):
        body = [f"<h1>2WikiMultiHopQA passages, part {n}</h1>"]
        for p in passages[first : first + per]:
            body.append(f"<h2>{html.escape(p['title'])}</h2>\n<p>{html.escape(p['text'])}</p>")
        page = (
            '<!DOCTYPE html><html><head><meta charset="utf-8">'
            f"<title>2Wiki part {n}</title></head><body>\n" + "\n".join(body) + "\n</body></html>"
        )
        name = out / "html" / f"part{n:03d}.html"
        name.write_text(page, encoding="utf-8")
        names.append(str(name))
    filters = {
        "pdf": 'pdf:writer_web_pdf_Export:{"ExportBookmarks":{"type":"boolean","value":"true"}}',
        "docx": "docx:MS Word 2007 XML",
    }
    profile = f"-env:UserInstallation=file://{out.resolve() / 'lo-profile'}"
    for fmt in formats:
        (out / fmt).mkdir(exist_ok=True)
        started = time.perf_counter()
        for i in range(0, len(names), 20):  # one soffice per 20 files
            subprocess.run(
                ["soffice", "--headless", profile, "--convert-to", filters[fmt],
                 "--outdir", str(out / fmt), *names[i : i + 20]],
                check=True, capture_output=True,
            )  # fmt: skip
        seconds = time.perf_counter() - started
        print(f"{fmt}: {len(names)} files in {seconds:.1f} s", file=sys.stderr)


def recall(graph: str, corpus: Path, questions: Path, n: int, depth: int) -> dict[str, Any]:
    import kgrag
    from kgrag.bench.evaluation import load_questions, recall_at

    keys = {p["title"]: f"{p['title']}\n{p['text']}" for p in json.loads(corpus.read_text())}
    asked = load_questions(questions)[: n or None]
    rows: dict[str, Any] = {}
    with kgrag.open(graph) as engine:
        docs = {d.id: d.title for d in engine.reader.documents()}
        passage: dict[str, str] = {}
        for c in engine.reader.chunks():
            path = c.meta.get("parent_path") or []
            title = path[-1] if path and path[-1] in keys else docs.get(c.doc_id, "")
            passage[c.id] = keys.get(title, "")
        unmapped = sum(1 for v in passage.values() if not v)
        for mode in ("dense", "local"):
            scores: dict[int, list[float]] = {2: [], 5: []}
            for q in asked:
                if mode == "local":
                    op = {"op": "local", "query": q.text, "k": depth, "unit": "chunk"}
                    hits = [h for h in engine.graph(op)["hits"] if h["unit"] == "chunk"]
                else:
                    hits = engine.retrieve({"query": q.text, "k": depth, "mode": "dense"})["hits"]
                ranked = [passage[h["id"]] for h in hits if passage.get(h["id"])]
                for k in scores:
                    scores[k].append(recall_at(ranked, q.gold, k))
            rows[mode] = {f"R@{k}": round(100 * statistics.fmean(v), 2) for k, v in scores.items()}
    rows["chunks"] = len(passage)
    rows["chunks without a passage"] = unmapped
    rows["questions"] = len(asked)
    return rows


def context_variants(chunks: list[Any]) -> dict[str, list[str]]:
    """Each chunk's text as embedded under the context forms docs/benchmarks.md compares
    ("Reading documents"): as built, and the forms the collection rule chose among."""
    from ingest.embed import chunk_text, collections

    grouped = collections(chunks)
    paths = [list(c.meta.get("parent_path") or []) for c in chunks]

    def rest(c: Any, p: list[str]) -> str:  # the context line less the deepest heading
        return c.context[: -len(p[-1])].removesuffix(" > ") if c.context.endswith(p[-1]) else ""

    def form(c: Any, p: list[str], make: Any) -> str:
        return make(c, p) if p else f"{c.context}\n{c.text}"

    forms = {
        "file title > path, text": lambda c, p: f"{c.context}\n{c.text}",
        "path, text": lambda c, p: f"{' > '.join(p)}\n{c.text}",
        "path, text, file title last": lambda c, p: (
            f"{' > '.join(p)}\n{c.text}\n{c.context.split(' > ')[0]}"
        ),
        "deepest heading, text": lambda c, p: f"{p[-1]}\n{c.text}",
        "deepest heading, text, rest of the path last": lambda c, p: (
            f"{p[-1]}\n{c.text}\n{rest(c, p)}".rstrip("\n")
        ),
    }
    out = {"as built": [chunk_text(c, c.doc_id in grouped) for c in chunks]}
    for name, make in forms.items():
        out[name] = [form(c, p, make) for c, p in zip(chunks, paths, strict=True)]
    return out


def recontext(graph: str, questions: Path, corpus: Path | None = None) -> dict[str, Any]:
    """Dense recall of a built graph's chunks re-embedded under each context form
    (:func:`context_variants`): with ``corpus`` (2Wiki), R@2 / R@5 by the passage a
    chunk came from; without, page R@1 / R@5 on a manuals question file."""
    import numpy as np

    import kgrag
    from kgrag.bench.evaluation import load_questions, recall_at
    from kgrag.config import Config
    from kgrag.encoders import load_encoder

    m = Config().models
    encoder = load_encoder(m.embedding, m.batch_size, m.device, m.runtime)
    with kgrag.open(graph) as engine:
        chunks = engine.reader.chunks()
    gold: list[Any]
    if corpus is not None:
        keys = {p["title"]: f"{p['title']}\n{p['text']}" for p in json.loads(corpus.read_text())}
        asked = load_questions(questions)
        texts, gold, ks = [q.text for q in asked], [frozenset(q.gold) for q in asked], (2, 5)
        paths = [c.meta.get("parent_path") or [] for c in chunks]
        found = [[keys[p[-1]]] if p and p[-1] in keys else [] for p in paths]
    else:
        asked_pages = json.loads(questions.read_text())["questions"]
        texts = [q["question"] for q in asked_pages]
        gold = [frozenset((q["file"], int(p)) for p in q["pages"]) for q in asked_pages]
        ks = (1, 5)
        from manuals_bench import hit_pages  # a sibling script: benchmarks/ is on the path

        found = [hit_pages({"meta": c.meta}) for c in chunks]
    queries = encoder.encode(texts)
    out: dict[str, Any] = {}
    for name, variant in context_variants(chunks).items():
        scores = queries @ encoder.encode(variant).T
        per: dict[int, list[float]] = {k: [] for k in ks}
        for i, want in enumerate(gold):
            ranked: list[Any] = []
            for j in np.argsort(-scores[i])[:60]:
                ranked.extend(g for g in found[j] if g not in ranked)
            for k in per:
                per[k].append(recall_at(ranked, want, k))
        out[name] = {f"R@{k}": round(100 * statistics.fmean(v), 2) for k, v in per.items()}
    return out


def speed(pdfs: list[Path], rounds: int) -> dict[str, Any]:
    from ingest.documents import pdf as reader

    pages = 0
    ours: list[float] = []
    poppler: list[float] = []
    for r in range(rounds):
        t0 = time.perf_counter()
        for path in pdfs:
            parsed = reader.read(path, str(path))
            pages += parsed.pages if r == 0 else 0
        ours.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for path in pdfs:
            subprocess.run(["pdftotext", "-layout", str(path), os.devnull], check=True)
        poppler.append(time.perf_counter() - t0)
    best_ours, best_poppler = min(ours), min(poppler)
    return {
        "files": len(pdfs),
        "pages": pages,
        "kgrag pages/s": round(pages / best_ours, 1),
        "pdftotext -layout pages/s": round(pages / best_poppler, 1),
        "ratio (kgrag time / pdftotext time)": round(best_ours / best_poppler, 2),
    }


def _words(text: str) -> Counter[str]:
    return Counter(re.findall(r"\w+", text.lower()))


def _f1(ours: str, reference: str) -> float:
    a, b = _words(ours), _words(reference)
    both = sum((a & b).values())
    if not a and not b:
        return 1.0
    p, r = both / max(1, sum(a.values())), both / max(1, sum(b.values()))
    return 2 * p * r / (p + r) if p + r else 0.0


def parsers(pdf: Path, first: int, last: int) -> dict[str, Any]:
    """Word F1 of each candidate's page text against ``pdftotext -layout`` (per page,
    averaged), and pages a second, on pages ``first``..``last`` of one PDF."""
    import pdfplumber
    import pypdfium2 as pdfium

    n = last - first + 1
    reference = [
        subprocess.run(
            ["pdftotext", "-layout", "-f", str(p), "-l", str(p), str(pdf), "-"],
            capture_output=True, text=True, check=True,
        ).stdout
        for p in range(first, last + 1)
    ]  # fmt: skip
    t0 = time.perf_counter()
    subprocess.run(
        ["pdftotext", "-layout", "-f", str(first), "-l", str(last), str(pdf), os.devnull]
    )
    rows: dict[str, Any] = {
        "pages": n,
        "pdftotext -layout pages/s": round(n / (time.perf_counter() - t0), 1),
    }
    t0 = time.perf_counter()
    doc = pdfium.PdfDocument(str(pdf))
    raw = [doc[i].get_textpage().get_text_range() for i in range(first - 1, last)]
    rows["pypdfium2"] = _row(raw, reference, n, t0)
    t0 = time.perf_counter()
    with pdfplumber.open(pdf) as plumb:
        plain = [plumb.pages[i].extract_text() or "" for i in range(first - 1, last)]
    rows["pdfplumber"] = _row(plain, reference, n, t0)
    t0 = time.perf_counter()
    with pdfplumber.open(pdf) as plumb:
        tables = sum(len(plumb.pages[i].find_tables()) for i in range(first - 1, last))
    rows["pdfplumber find_tables"] = {
        "pages/s": round(n / (time.perf_counter() - t0), 1),
        "tables": tables,
    }
    from ingest.documents import pdf as reader

    t0 = time.perf_counter()
    parsed = reader.read(pdf, str(pdf))
    seconds = time.perf_counter() - t0
    by_page: dict[int, list[str]] = {}
    for block in parsed.blocks:
        cells = " ".join(" ".join(r) for r in block.rows)
        by_page.setdefault(block.page, []).append(f"{block.text} {cells}")
    ours = [" ".join(by_page.get(p, [])) for p in range(first, last + 1)]
    rows["kgrag reader (whole file, structure, tables)"] = {
        "F1": round(statistics.fmean(_f1(o, r) for o, r in zip(ours, reference, strict=True)), 4),
        "pages/s": round(parsed.pages / seconds, 1),
    }
    return rows


def _row(texts: list[str], reference: list[str], n: int, t0: float) -> dict[str, float]:
    seconds = time.perf_counter() - t0
    f1 = statistics.fmean(_f1(t, r) for t, r in zip(texts, reference, strict=True))
    return {"F1": round(f1, 4), "pages/s": round(n / seconds, 1)}


def ocr(image: Path, reference: str) -> dict[str, Any]:
    """Word F1 and seconds of each OCR engine on one image against its known text."""
    from PIL import Image

    from ingest.documents import ocr as engines

    out: dict[str, Any] = {}
    for name in ("tesseract", "rapidocr"):
        os.environ["KGRAG_OCR"] = name
        t0 = time.perf_counter()
        text = engines.read_text(Image.open(image))
        out[name] = {"F1": round(_f1(text, reference), 4), "s": round(time.perf_counter() - t0, 2)}
        out[name]["words run together"] = sum(len(w) > 14 for w in text.split())
    os.environ.pop("KGRAG_OCR", None)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("render")
    r.add_argument("--corpus", type=Path, required=True)
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--per", type=int, default=60)
    r.add_argument("--formats", default="pdf,docx")
    e = sub.add_parser("recall")
    e.add_argument("--graph", required=True)
    e.add_argument("--corpus", type=Path, required=True)
    e.add_argument("--questions", type=Path, required=True)
    e.add_argument("--n", type=int, default=0)
    e.add_argument("--depth", type=int, default=30, help="chunks asked for per question")
    pa = sub.add_parser("parsers")
    pa.add_argument("pdf", type=Path)
    pa.add_argument("--first", type=int, default=20)
    pa.add_argument("--last", type=int, default=80)
    oc = sub.add_parser("ocr")
    oc.add_argument("image", type=Path)
    oc.add_argument("--reference", type=Path, required=True, help="a text file of its words")
    rc = sub.add_parser("recontext")
    rc.add_argument("--graph", required=True)
    rc.add_argument("--questions", type=Path, required=True)
    rc.add_argument(
        "--corpus", type=Path, help="2Wiki's corpus (else --questions is a manuals file)"
    )
    s = sub.add_parser("speed")
    s.add_argument("pdfs", nargs="+", type=Path)
    s.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    if args.command == "render":
        render(args.corpus, args.out, args.per, args.formats.split(","))
    elif args.command == "recall":
        out = recall(args.graph, args.corpus, args.questions, args.n, args.depth)
        print(json.dumps(out, indent=1))
    elif args.command == "recontext":
        print(json.dumps(recontext(args.graph, args.questions, args.corpus), indent=1))
    elif args.command == "parsers":
        print(json.dumps(parsers(args.pdf, args.first, args.last), indent=1))
    elif args.command == "ocr":
        print(json.dumps(ocr(args.image, args.reference.read_text()), indent=1))
    else:
        print(json.dumps(speed(args.pdfs, args.rounds), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
