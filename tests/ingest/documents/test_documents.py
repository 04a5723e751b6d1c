"""Documents in their own formats, end to end: the LibreOffice-made files of
tests/data/docs read into typed chunks, built into a real graph, searched, and served
by the REST route (see tests/data/docs/README.md for what each file holds)."""

from __future__ import annotations

import http.client
import json
import shutil
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ingest import ingest_paths
from ingest.chunk import chunk_documents
from ingest.documents import read_file
from ingest.load import load_paths
from kgrag.config import load_config
from kgrag.errors import InputError
from kgrag.types import Chunk

DOCS = Path(__file__).resolve().parents[2] / "data" / "docs"
GOOD = ["report.pdf", "report.docx", "slides.pptx", "sheet.xlsx", "report_export.html"]


def chunks_of(*names: str) -> list[Chunk]:
    return chunks_of_paths(*(DOCS / n for n in names))


def holding(chunks: list[Chunk], text: str) -> Chunk:
    [found] = [c for c in chunks if text in c.text and c.meta["chunk_type"] == "text"]
    return found


# --- reading --------------------------------------------------------------------------


def test_pdf_chunks_carry_type_section_path_and_page() -> None:
    chunks = chunks_of("report.pdf")
    assert {c.meta["chunk_type"] for c in chunks} == {"text", "table", "image"}
    fog = holding(chunks, "Muckle Flugga's fog signal was decommissioned in 1987")
    assert fog.meta["parent_path"] == ["Lighthouse Survey 2024", "Maintenance", "Fog signals"]
    assert fog.meta["page"] == 3 and "pages" not in fog.meta
    assert fog.meta["source"] == "report.pdf"
    spanning = holding(chunks, "mariners depend on it to identify the station at night")
    assert spanning.meta["pages"] == [2, 3]  # the paragraph runs over the page break
    assert holding(chunks, "Skerryvore lighthouse stands on a reef").meta["page"] == 1
    every = "\n".join(c.text for c in chunks)
    assert "Page 1 of 3" not in every and "draft" not in every  # the running footer is gone


def test_pdf_table_keeps_its_columns_and_caption() -> None:
    [table] = [c for c in chunks_of("report.pdf") if c.meta["chunk_type"] == "table"]
    lines = table.text.split("\n")
    assert lines[0] == "Table 1: Stations inspected"
    assert "Station: Bell Rock; Region: Angus; Height (m): 35; First lit: 1811" in lines
    assert "<th>Height (m)</th>" in table.meta["html"]
    assert "<td>Muckle Flugga</td><td>Shetland</td><td>20</td><td>1858</td>" in table.meta["html"]
    assert {k: table.meta["table"][k] for k in ("index", "rows", "of")} == {
        "index": 0,
        "rows": [1, 4],
        "of": 4,
    }
    assert table.meta["table"]["header"] == ["Station", "Region", "Height (m)", "First lit"]


def test_pdf_figure_is_an_image_chunk_with_its_caption_and_bytes() -> None:
    loaded = load_paths([DOCS / "report.pdf"])
    [doc] = loaded.documents
    [image] = doc.meta["layout"]["images"]
    assert image["caption"] == "Figure 1: Beam range by station" and image["mime"] == "image/png"
    chunks = chunk_documents(loaded.documents, max_tokens=256, overlap_tokens=32)
    [chunk] = [c for c in chunks if c.meta["chunk_type"] == "image"]
    assert chunk.text == "Figure 1: Beam range by station"
    assert "[Image 1: Figure 1: Beam range by station]" in doc.text  # the placeholder


def test_a_table_too_long_for_one_chunk_is_split_with_its_header() -> None:
    loaded = load_paths([DOCS / "report.pdf"])
    chunks = chunk_documents(loaded.documents, max_tokens=24, overlap_tokens=0)
    tables = [c for c in chunks if c.meta["chunk_type"] == "table"]
    assert len(tables) > 1
    for c in tables:
        assert c.text.startswith("Table 1: Stations inspected\nStation: ")
        assert c.meta["html"].count("<th>Station</th>") == 1
    rows = [
        r for c in tables for r in range(c.meta["table"]["rows"][0], c.meta["table"]["rows"][1] + 1)
    ]
    assert rows == [1, 2, 3, 4]


def test_office_files_give_sections_tables_images_and_slides() -> None:
    chunks = chunks_of("report.docx", "slides.pptx", "sheet.xlsx")
    docx = [c for c in chunks if c.meta["source"] == "report.docx"]
    assert holding(docx, "Muckle Flugga's fog signal").meta["parent_path"][-1] == "Fog signals"
    [picture] = [c for c in docx if c.meta["chunk_type"] == "image"]
    assert "Bar chart of beam range by station" in picture.text  # its alt text
    slides = [c for c in chunks if c.meta["source"] == "slides.pptx"]
    [table] = [c for c in slides if c.meta["chunk_type"] == "table"]
    assert table.meta["page"] == 2 and "Region: South; Revenue: 95; Growth: 7%" in table.text
    assert holding(slides, "Lisbon office opened in March").meta["page"] == 3
    sheet = [
        c for c in chunks if c.meta["source"] == "sheet.xlsx" and c.meta["chunk_type"] == "table"
    ]
    assert [c.meta["parent_path"] for c in sheet] == [["Employees"], ["Budget"]]
    assert "Name: Grace Hopper; Department: Engineering; City: Arlington" in sheet[0].text


def test_scans_are_read_by_ocr() -> None:
    scanned = read_file(DOCS / "scanned.pdf", "scanned.pdf")
    assert "Skerryvore lighthouse stands on a reef" in " ".join(scanned.document.text.split())
    image = read_file(DOCS / "scan.png", "scan.png")
    assert "Lighthouse Survey 2024" in image.document.meta["layout"]["images"][0]["ocr"]


def test_rapidocr_is_the_other_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGRAG_OCR", "rapidocr")
    read = read_file(DOCS / "scan.png", "scan.png")
    assert "Skerryvore" in read.document.meta["layout"]["images"][0]["ocr"]


def test_without_ocr_a_scan_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGRAG_OCR", "off")
    with pytest.raises(InputError) as err:
        read_file(DOCS / "scanned.pdf", "docs/scanned.pdf")
    assert err.value.path == "docs/scanned.pdf"
    assert "page 1: no text layer, and OCR is not installed" in err.value.reason
    read = read_file(DOCS / "scan.png", "scan.png")  # the picture itself is still kept
    assert read.warnings == [
        "no text read from the image: OCR is not installed (install Tesseract"
        " (apt-get install tesseract-ocr) or pip install 'kgrag[ocr]')"
    ]


# --- bad input ------------------------------------------------------------------------


def _huge_png(path: Path) -> Path:
    """A PNG whose header claims 100,000 x 100,000 pixels (a decompression bomb)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 100_000, 100_000, 8, 0, 0, 0, 0)
    data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64))
    path.write_bytes(data + chunk(b"IEND", b""))
    return path


def test_broken_files_get_clear_errors_and_the_rest_go_in(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ["encrypted.pdf", "truncated.pdf", "empty.pdf", "corrupt.docx", "broken.xlsx"]:
        shutil.copy(DOCS / name, folder / name)
    shutil.copy(DOCS / "sheet.csv", folder / "sheet.csv")
    _huge_png(folder / "huge.png")
    loaded = load_paths([folder])
    reasons = {Path(e.path).name: e.reason for e in loaded.errors}
    assert reasons["encrypted.pdf"] == "encrypted PDF: it needs a password to open"
    assert reasons["truncated.pdf"].startswith("not a readable PDF (damaged or truncated")
    assert reasons["empty.pdf"] == "empty file"
    assert reasons["corrupt.docx"] == "not a valid .docx file (not a zip archive)"
    assert reasons["broken.xlsx"].startswith("not a valid .xlsx file")
    assert reasons["huge.png"].startswith("image too large to decode (10,000,000,000 pixels")
    assert [d.meta["source"] for d in loaded.documents] == ["sheet.csv"]


# --- a graph of documents -----------------------------------------------------------


@pytest.fixture(scope="module")
def docs_graph(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("kb") / "kb"
    folder.mkdir()
    for name in GOOD:
        shutil.copy(DOCS / name, folder / name)
    shutil.copy(DOCS / "report_export_html_50d91a576db8df91.png", folder)
    graph = folder.parent / "graph"
    report = ingest_paths([folder], graph, load_config(extract={"n_process": 1}))
    assert report.changed and not report.errors
    return graph


def test_cli_query_prints_each_hits_file_page_and_type(
    docs_graph: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kgrag.cli.main import main

    question = "Which station is in Shetland, and when was it first lit?"
    assert main(["query", "--graph", str(docs_graph), "-k", "10", "--unit", "chunk", question]) == 0
    shown = capsys.readouterr().out
    assert "report.pdf p. 1, table" in shown  # the stations table, on the first page
    assert "report.docx, table" in shown  # Word has no pages


def test_hits_cite_file_section_and_page(docs_graph: Path) -> None:
    import kgrag

    with kgrag.open(docs_graph) as engine:
        hits = engine.retrieve(
            {"query": "When was Muckle Flugga's fog signal decommissioned?", "k": 10}
        )["hits"]
        [pdf] = [h for h in hits if h["meta"]["source"] == "report.pdf"][:1]
        assert pdf["meta"]["chunk_type"] == "text" and pdf["meta"]["page"] == 3
        assert pdf["citation"]["uri"].endswith("kb/report.pdf#page=3")
        assert pdf["meta"]["parent_path"][-1] == "Fog signals"
        pages = engine.retrieve(
            {"query": "Muckle Flugga fog signal decommissioned", "k": 3, "unit": "page"}
        )
        top = pages["hits"][0]
        assert top["unit"] == "page" and top["meta"]["page"] == 3
        assert "decommissioned in 1987" in top["text"] and top["provenance"]["leaves"]


def test_a_table_fact_is_walked_by_local_search(docs_graph: Path) -> None:
    import kgrag

    with kgrag.open(docs_graph) as engine:
        out = engine.graph(
            {
                "op": "local",
                "query": "Which department is Ada Lovelace in, and its budget?",
                "k": 5,
                "unit": ["path"],
            }
        )
    texts = [h["text"] for h in out["hits"]]
    quoted = [p for h in out["hits"] for p in h["meta"]["passages"].values()]
    tables = {tuple(p["parent_path"]) for p in quoted if p["chunk_type"] == "table"}
    assert tables == {("Employees",), ("Budget",)}  # each quoted row says where it is
    assert {p["source"] for p in quoted} == {"sheet.xlsx"}
    assert any(
        "Ada Lovelace —department→ Research" in t and "Research —budget→ 250000" in t for t in texts
    )
    assert any(
        "“Name: Ada Lovelace; Department: Research; City: London; Start year: 2019”" in t
        for t in texts
    )


@pytest.fixture(scope="module")
def url(docs_graph: Path) -> Iterator[str]:
    from kgrag.server import Graphs, Running, create_app

    graphs = Graphs.open([f"kb={docs_graph}"])
    with Running(create_app(graphs)) as running:
        yield running.url
    graphs.close()


def _call(url: str, method: str, path: str, body: Any = None) -> tuple[int, bytes, str]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=300)
    data = None if body is None else json.dumps(body).encode()
    conn.request(method, path, data, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    out = resp.status, resp.read(), resp.getheader("Content-Type") or ""
    conn.close()
    return out


def query(url: str, **body: Any) -> dict[str, Any]:
    status, raw, _ = _call(url, "POST", "/v1/retrieval/query", {"namespace": "kb"} | body)
    assert status == 200, raw
    return json.loads(raw)


def test_knowhere_types_evidence_and_image_parts(url: str) -> None:
    tables = query(
        url, query="lighthouse stations heights", top_k=5, data_type=4, use_agentic=False
    )
    assert tables["results"] and {r["chunk_type"] for r in tables["results"]} == {"table"}
    part = tables["evidence"][0]["parts"][0]
    assert part["type"] == "text" and part["text"].startswith("<table>")
    images = query(url, query="beam range chart", top_k=3, chunk_types=["image"], use_agentic=False)
    assert {r["chunk_type"] for r in images["results"]} == {"image"}
    image = next(p for g in images["evidence"] for p in g["parts"] if p["type"] == "image")
    status, data, mime = _call(url, "GET", image["uri"])
    assert status == 200 and mime == "image/png" and data.startswith(b"\x89PNG")
    doc = image["uri"].split("/")[4]
    assert _call(url, "GET", "/v1/retrieval/images/nope/1?namespace=kb")[0] == 404
    assert _call(url, "GET", f"/v1/retrieval/images/{doc}/9?namespace=kb")[0] == 404
    assert _call(url, "GET", f"/v1/retrieval/images/{doc}/x?namespace=kb")[0] == 422
    assert _call(url, "GET", f"/v1/retrieval/images/{doc}/1?namespace=other")[0] == 404
    pdf = query(
        url,
        query="Skerryvore reef Tiree",
        top_k=3,
        signal_paths=["report.pdf"],
        filter_mode="keep",
        use_agentic=False,
    )
    assert {r["source"]["source_file_name"] for r in pdf["results"]} == {"report.pdf"}
    assert pdf["evidence"][0]["header"].startswith("[E1] [§ report.pdf / Lighthouse Survey 2024")
    assert all(r["source"]["page"] >= 1 for r in pdf["results"])
    figure = query(
        url,
        query="Coastal stations figure beam range",
        top_k=8,
        signal_paths=["report.pdf"],
        filter_mode="keep",
        use_agentic=False,
    )
    parts = [p for g in figure["evidence"] for p in g["parts"]]
    assert any(
        p["type"] == "image" and p["caption"] == "Figure 1: Beam range by station" for p in parts
    )


# --- files are the unit a user updates ----------------------------------------------


def test_an_edited_file_replaces_its_chunks_and_prune_removes_gone_files(tmp_path: Path) -> None:
    import kgrag

    folder = tmp_path / "kb"
    folder.mkdir()
    shutil.copy(DOCS / "sheet.csv", folder / "sheet.csv")
    shutil.copy(DOCS / "slides.pptx", folder / "slides.pptx")
    (folder / "notes.txt").write_text("The Bell Rock keeper logs the weather every morning.\n")
    graph = tmp_path / "graph"
    config = load_config(extract={"n_process": 1})
    ingest_paths([folder], graph, config)
    with kgrag.open(graph) as engine:
        before = {c["id"]: c for c in engine.chunks()}
    (folder / "notes.txt").write_text("The Bell Rock keeper logs the tide every evening.\n")
    report = ingest_paths([folder], graph, config)
    assert report.changed and report.counts["documents"] == 3
    with kgrag.open(graph) as engine:
        after = {c["id"]: c for c in engine.chunks()}
    texts = [c["text"] for c in after.values()]
    assert "The Bell Rock keeper logs the tide every evening." in texts
    assert not any("weather every morning" in t for t in texts)
    kept = {i for i, c in before.items() if c["meta"]["source"] != "notes.txt"}
    assert kept <= set(after)  # the unchanged files' chunks are untouched
    (folder / "slides.pptx").unlink()
    assert ingest_paths([folder], graph, config).counts["documents"] == 3  # no prune: kept
    report = ingest_paths([folder], graph, config, prune=True)
    assert report.pruned == 1 and report.counts["documents"] == 2
    with kgrag.open(graph) as engine:
        assert {c["meta"]["source"] for c in engine.chunks()} == {"sheet.csv", "notes.txt"}


def test_a_section_is_about_its_heading_only_where_its_opening_names_it(tmp_path: Path) -> None:
    from ingest.extract import TITLE_LABEL, extract
    from kgrag.text.nlp import load_spacy

    page = tmp_path / "people.html"
    page.write_text(
        "<html><body><h1>Film people</h1>"
        "<h2>2.1 Robert North Bradbury</h2><p>Robert N. Bradbury (1886-1949) was an American"
        " film director who directed 125 movies.</p>"
        "<h2>Maintenance</h2><p>Routine maintenance of the archive happens every spring.</p>"
        "</body></html>",
        encoding="utf-8",
    )
    chunks = chunks_of_paths(page)
    about = {c.meta["parent_path"][-1]: c.meta.get("subject") for c in chunks}
    assert about == {
        "Film people": None,  # the title alone: nothing follows it
        "2.1 Robert North Bradbury": "Robert North Bradbury",
        "Maintenance": None,
    }
    found = extract(
        chunks,
        {c.doc_id: "Film people" for c in chunks},
        load_spacy("auto"),
        skip_labels=(),
        concepts=True,
        max_cooc_entities=8,
        n_process=1,
        batch_size=8,
    )
    titles = {(m.chunk_id, m.name) for m in found.mentions if m.label == TITLE_LABEL}
    by_heading = {c.meta["parent_path"][-1]: c.id for c in chunks}
    assert (by_heading["2.1 Robert North Bradbury"], "Robert North Bradbury") in titles
    assert (by_heading["Maintenance"], "Film people") in titles  # the document's title


def chunks_of_paths(*paths: Path) -> list[Chunk]:
    loaded = load_paths(list(paths))
    assert loaded.errors == [], loaded.errors
    return chunk_documents(loaded.documents, max_tokens=256, overlap_tokens=32)
