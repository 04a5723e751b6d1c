"""The HTML, Word, PowerPoint, Excel and CSV parsers on real files: ones written here by
the real libraries, and the LibreOffice-made ones in tests/data/docs/ (see its README)."""

from __future__ import annotations

import base64
import datetime as dt
import io
import shutil
import zipfile
from pathlib import Path
from typing import Any

import docx
import openpyxl
import pptx
import pytest
from docx.oxml.ns import qn
from pptx.util import Inches

from ingest.documents import html, office, sheets
from ingest.documents.model import HEADING, IMAGE, MAX_TABLE_ROWS, TABLE, TEXT, Block, Parsed
from ingest.documents.zipguard import check_zip
from kgrag.errors import InputError

DOCS = Path(__file__).resolve().parents[2] / "data" / "docs"
#: what the LibreOffice-made report holds, whatever its format (tests/data/docs/README.md)
REPORT_HEADS = [(1, "Lighthouse Survey 2024"), (2, "Coastal stations"), (2, "Maintenance")]
REPORT_HEADS += [(3, "Fog signals")]
REPORT_ITEMS = ["- Clean the lens", "- Check the fog signal", "- Log the keeper's report"]
READERS = [office.read_docx, office.read_pptx, sheets.read_xlsx, sheets.read_csv, html.read]


def png(width: int = 60, height: int = 40, color: str = "red") -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, format="PNG")
    return out.getvalue()


def kinds(parsed: Parsed, kind: str) -> list[Block]:
    return [b for b in parsed.blocks if b.kind == kind]


def texts(parsed: Parsed) -> list[str]:
    return [b.text for b in parsed.blocks if b.kind == TEXT]


def put(folder: Path, name: str, data: str | bytes) -> Path:
    (folder / name).write_bytes(data.encode() if isinstance(data, str) else data)
    return folder / name


def fill(cell: Any, rows: list[list[str]]) -> None:
    """Write ``rows`` into a Word or PowerPoint table through its ``cell(r, c)``."""
    for r, row in enumerate(rows):
        for c, value in enumerate(row):
            cell(r, c).text = value


def fixture(name: str) -> Path:
    path = DOCS / name
    if not path.exists():
        pytest.skip(f"{name} not in tests/data/docs")
    return path


# --- the zip guard ---------------------------------------------------------------------


def test_a_file_that_is_not_a_zip_names_the_format_it_should_be() -> None:
    with pytest.raises(InputError) as err:
        office.read_docx(fixture("corrupt.docx"), "corrupt.docx")
    assert err.value.reason == "not a valid .docx file (not a zip archive)"
    assert err.value.path == "corrupt.docx"
    with pytest.raises(InputError, match=r"broken\.xlsx: not a valid \.xlsx file"):
        sheets.read_xlsx(fixture("broken.xlsx"), "broken.xlsx")  # a zip cut in half


def test_an_encrypted_office_file_is_called_encrypted(tmp_path: Path) -> None:
    # Office saves a password-protected .docx as an OLE file holding an EncryptedPackage
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504) + "EncryptedPackage".encode("utf-16-le")
    with pytest.raises(InputError) as err:
        office.read_docx(put(tmp_path, "secret.docx", ole), "secret.docx")
    assert err.value.reason.startswith("an encrypted (password-protected) .docx file")


@pytest.mark.parametrize("read", READERS, ids=lambda f: f"{f.__module__}.{f.__name__}")
def test_an_empty_file_is_refused_as_empty(tmp_path: Path, read: Any) -> None:
    with pytest.raises(InputError) as err:
        read(put(tmp_path, "empty", b""), "empty")
    assert err.value.reason == "empty file"


def test_a_zip_that_is_not_the_format_gives_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.docx"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("notes.txt", "just a zip")
    with pytest.raises(InputError, match=r"not a valid \.docx file \("):
        office.read_docx(path, "notes.docx")
    with pytest.raises(InputError, match=r"not a valid \.pptx file \("):
        office.read_pptx(path, "notes.pptx")
    with pytest.raises(InputError, match=r"not a valid \.xlsx file \("):
        sheets.read_xlsx(path, "notes.xlsx")
    with pytest.raises(InputError, match=r"not a valid \.pptx file \(.*not a PowerPoint"):
        office.read_pptx(make_docx(tmp_path), "report.pptx")


def _write_zeros(z: zipfile.ZipFile, name: str, megabytes: int) -> None:
    chunk = bytes(1024 * 1024)
    with z.open(name, "w", force_zip64=True) as member:
        for _ in range(megabytes):
            member.write(chunk)


def test_a_zip_bomb_inside_a_real_docx_is_refused_before_it_is_opened(tmp_path: Path) -> None:
    bomb = Path(shutil.copy(make_docx(tmp_path), tmp_path / "bomb.docx"))
    with zipfile.ZipFile(bomb, "a", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        _write_zeros(z, "word/media/huge.bin", 600)
    assert bomb.stat().st_size < 5 * 1024 * 1024
    with pytest.raises(InputError) as err:
        office.read_docx(bomb, "bomb.docx")
    assert "600 MB" in err.value.reason


def test_members_adding_up_past_the_limit_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.xlsx"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for n in range(13):  # each under the size a ratio is judged at
            _write_zeros(z, f"xl/media/part{n}.bin", 45)
    with pytest.raises(InputError) as err:
        check_zip(path, "big.xlsx")
    assert err.value.reason == "unzips to 585 MB, over the 512 MB limit"


# --- HTML ------------------------------------------------------------------------------

PAGE = """<!DOCTYPE html><html><head><title>  Field   notes </title>
<style>p {{ color: red }}</style><script>document.write("tracking")</script></head><body>
<header><a href="/">Home</a> Site banner</header><nav><ul><li>Menu item</li></ul></nav>
<div role="navigation">Skip links</div><main><article>
<header><h1>Lighthouse  report</h1></header>
<p>The   <b>Skerryvore</b> light,<br>built in 1844.</p>
Loose text in the article.
<div>Inside a div <span>with a span</span><div>nested block</div> and its tail</div>
<ul><li>clean the lens</li><li>check the fog signal<ul><li>horn</li></ul></li>
<li><p>log the report</p></li></ul><ol start="3"><li>third</li><li>fourth</li></ol>
<h2>Code</h2><pre>def light():
    return  "on"</pre>
<h3>Stations</h3><table><caption>Table 1: Stations</caption>
<thead><tr><th>Station</th><th colspan="2">Heights</th></tr></thead>
<tbody><tr><td rowspan="2">Bell Rock</td><td>35</td><td>36</td></tr>
<tr><td>37</td><td>38</td></tr></tbody></table>
<table><tr><th>A</th><th>B</th></tr><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr>
</table><figure><img src="img/beam.png" alt="Bar chart of beam range"><figcaption>Figure 1:
beam range</figcaption></figure>
<p><img src="data:image/png;base64,{inline}" alt="Inline dot"> after the dot</p>
<img src="../outside.png" alt="Outside the folder">
<img src="https://example.com/remote.png" alt="Remote picture">
<img src="spacer.png" width="1" height="1">
<dl><dt>Lantern</dt><dd>The glazed room at the top.</dd></dl>
<blockquote>Keep the light burning.</blockquote>
<form><label>Email</label><input name="e"><button>Subscribe</button></form></article></main>
<aside>Related posts</aside><footer>Copyright 2024</footer></body></html>
"""


BEAM, DOT = png(80, 40, "blue"), png(30, 30, "green")


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Parsed:
    """PAGE read from a folder beside which an image lies that must not be read."""
    root = tmp_path_factory.mktemp("html")
    site = root / "site"
    (site / "img").mkdir(parents=True)
    (site / "img" / "beam.png").write_bytes(BEAM)
    (site / "spacer.png").write_bytes(png(1, 1))
    (root / "outside.png").write_bytes(png(50, 50, "black"))
    path = site / "page.html"
    path.write_text(PAGE.format(inline=base64.b64encode(DOT).decode()), encoding="utf-8")
    return html.read(path, "page.html")


def test_html_headings_come_in_order_with_their_levels(page: Parsed) -> None:
    heads = [(b.level, b.text) for b in kinds(page, HEADING)]
    assert heads == [(1, "Lighthouse report"), (2, "Code"), (3, "Stations")]
    assert page.title == "Field notes" and not page.paged and page.pages == 0


def test_html_page_chrome_is_dropped_and_loose_text_kept(page: Parsed) -> None:
    everything = " ".join(b.text for b in page.blocks)
    chrome = "Site banner|Menu item|Skip links|tracking|color|Related|Copyright|Subscribe|Email"
    assert not [c for c in chrome.split("|") if c in everything]
    found = texts(page)
    assert " | ".join(found[:5]) == (
        "The Skerryvore light,\nbuilt in 1844. | Loose text in the article. | "
        "Inside a div with a span | nested block | and its tail"
    )
    assert "Lantern" in found and "The glazed room at the top." in found
    assert "Keep the light burning." in found


def test_html_lists_keep_their_markers_and_pre_its_lines(page: Parsed) -> None:
    found = texts(page)
    assert 'def light():\n    return  "on"' in found
    items = [t for t in found if t.lstrip().startswith(("- ", "3. ", "4. "))]
    assert " | ".join(items) == (
        "- clean the lens | - check the fog signal |   - horn | - log the report | 3. third | "
        "4. fourth"
    )


def test_html_tables_line_up_spans_under_their_header(page: Parsed) -> None:
    stations, double = kinds(page, TABLE)
    assert stations.text == "Table 1: Stations" and stations.header_rows == 1
    assert stations.rows[0] == ["Station", "Heights", "Heights"]  # colspan repeated
    assert stations.rows[1:] == [["Bell Rock", "35", "36"], ["Bell Rock", "37", "38"]]
    assert double.header_rows == 2  # two leading rows made only of <th>
    assert double.rows[2] == ["1", "2"]


def test_html_images_carry_bytes_alt_and_caption_from_inside_the_folder_only(
    page: Parsed,
) -> None:
    images = kinds(page, IMAGE)
    by_alt = {b.alt: b for b in images}
    beam = by_alt["Bar chart of beam range"]
    assert beam.data == BEAM and beam.mime == "image/png" and beam.text == "Figure 1: beam range"
    assert by_alt["Inline dot"].data == DOT
    assert by_alt["Outside the folder"].data == b""  # ../outside.png exists but is not read
    assert by_alt["Remote picture"].data == b""
    assert len(images) == 4  # the 1x1 spacer is not a figure
    blocks = page.blocks  # a picture inside a paragraph follows its text
    at = next(i for i, b in enumerate(blocks) if b.text == "after the dot")
    assert blocks[at + 1].kind == IMAGE and blocks[at + 1].alt == "Inline dot"


def test_html_oversized_image_is_warned_about_and_not_kept(tmp_path: Path) -> None:
    put(tmp_path, "huge.png", bytes(9 * 1024 * 1024))
    parsed = html.read(put(tmp_path, "p.html", '<p>Text</p><img src="huge.png" alt="Huge">'), "p")
    (image,) = kinds(parsed, IMAGE)
    assert image.alt == "Huge" and image.data == b""
    assert parsed.warnings == [
        "image 'huge.png': 9 MB, over the 8 MB limit; its bytes were not kept"
    ]


def test_html_meta_charset_is_honoured_and_utf8_is_the_default(tmp_path: Path) -> None:
    ru = '<html><head><meta charset="windows-1251"></head><body><h1>Привет</h1><p>мир</p>'
    parsed = html.read(put(tmp_path, "ru.html", ru.encode("cp1251")), "ru.html")
    assert parsed.title == "Привет"  # no <title>: the first h1
    assert texts(parsed) == ["мир"]
    plain = put(tmp_path, "plain.html", "<p>Café — naïve</p>")
    assert texts(html.read(plain, "plain.html")) == ["Café — naïve"]


def test_a_layout_table_is_read_as_content(tmp_path: Path) -> None:
    inner = "<table><tr><th>K</th><th>V</th></tr><tr><td>a</td><td>1</td></tr></table>"
    layout = f"<table><tr><td><h2>Inside</h2><p>Body text</p>{inner}</td></tr></table>"
    parsed = html.read(put(tmp_path, "layout.html", layout), "layout.html")
    assert [b.kind for b in parsed.blocks] == [HEADING, TEXT, TABLE]
    assert kinds(parsed, TABLE)[0].rows == [["K", "V"], ["a", "1"]]


def test_libreoffice_html_export_reads_like_the_report() -> None:
    parsed = html.read(fixture("report_export.html"), "report_export.html")
    assert [(b.level, b.text) for b in kinds(parsed, HEADING)] == REPORT_HEADS
    (table,) = kinds(parsed, TABLE)
    assert table.rows[0] == ["Station", "Region", "Height (m)", "First lit"]
    assert ["Bell Rock", "Angus", "35", "1811"] in table.rows
    assert len(table.rows) == 5
    (image,) = kinds(parsed, IMAGE)
    assert image.alt == "Bar chart of beam range by station"
    assert image.data == (DOCS / "report_export_html_50d91a576db8df91.png").read_bytes()
    assert [t for t in texts(parsed) if t.startswith("- ")] == REPORT_ITEMS
    assert not any("draft" in t and "Page" in t for t in texts(parsed))  # running footer


# --- Word ------------------------------------------------------------------------------


def make_docx(tmp_path: Path) -> Path:
    document = docx.Document()
    document.core_properties.title = "Survey 2024"
    document.sections[0].header.paragraphs[0].text = "RUNNING HEADER"
    document.add_paragraph("Lighthouse Survey", style="Title")
    document.add_heading("Coastal stations", level=1)
    document.add_paragraph("Skerryvore stands on a reef.")
    document.add_heading("Tasks", level=2)
    document.add_paragraph("Clean the lens", style="List Bullet")
    document.add_paragraph("Check the horn", style="List Number")
    table = document.add_table(rows=3, cols=3)
    fill(table.cell, [["Station", "Region", "Height"], ["Bell Rock", "Angus", "35"]])
    table.cell(2, 0).merge(table.cell(2, 1)).text = "Both columns"
    table.cell(2, 2).text = "20"
    paragraph = document.add_paragraph("The chart follows.")
    paragraph.add_run().add_picture(io.BytesIO(PICTURE))
    paragraph._p.xpath(".//wp:docPr")[0].set("descr", "Beam chart")
    document.add_heading("Fog signals", level=3)
    localised = document.styles.add_style("Überschrift Eigen", 1)  # a paragraph style
    outline = localised.element.get_or_add_pPr().makeelement(qn("w:outlineLvl"))
    outline.set(qn("w:val"), "1")
    localised.element.get_or_add_pPr().append(outline)
    document.add_paragraph("Localised heading", style=localised)
    document.save(str(tmp_path / "report.docx"))
    return tmp_path / "report.docx"


PICTURE = png(90, 50, "yellow")


@pytest.fixture(scope="module")
def word(tmp_path_factory: pytest.TempPathFactory) -> Parsed:
    return office.read_docx(make_docx(tmp_path_factory.mktemp("docx")), "report.docx")


def test_docx_headings_follow_styles_and_outline_levels(word: Parsed) -> None:
    heads = [(b.level, b.text) for b in kinds(word, HEADING)]
    assert heads[:3] == [(1, "Lighthouse Survey"), (1, "Coastal stations"), (2, "Tasks")]
    assert heads[3:] == [(3, "Fog signals"), (2, "Localised heading")]  # by outline level
    assert word.title == "Survey 2024"  # the core properties win
    assert not word.paged and word.pages == 0


def test_docx_keeps_lists_pictures_and_merged_cells_not_running_headers(word: Parsed) -> None:
    found = texts(word)
    assert "- Clean the lens" in found and "1. Check the horn" in found  # as Word numbers it
    assert "Skerryvore stands on a reef." in found
    assert not any("RUNNING HEADER" in b.text for b in word.blocks)
    at = next(i for i, b in enumerate(word.blocks) if b.text == "The chart follows.")
    image = word.blocks[at + 1]  # after the text of the paragraph it sits in
    assert image.kind == IMAGE
    assert image.data == PICTURE and image.mime == "image/png" and image.alt == "Beam chart"
    (table,) = kinds(word, TABLE)
    assert table.header_rows == 1 and table.rows[0] == ["Station", "Region", "Height"]
    assert table.rows[1:] == [["Bell Rock", "Angus", "35"], ["Both columns", "Both columns", "20"]]


def test_libreoffice_docx_reads_like_the_report() -> None:
    parsed = office.read_docx(fixture("report.docx"), "report.docx")
    assert [(b.level, b.text) for b in kinds(parsed, HEADING)] == REPORT_HEADS
    (table,) = kinds(parsed, TABLE)
    assert table.rows[0] == ["Station", "Region", "Height (m)", "First lit"]
    assert table.header_rows == 1
    assert ["Muckle Flugga", "Shetland", "20", "1858"] in table.rows
    assert table.text == "Table 1: Stations inspected"  # the Caption paragraph above it
    (image,) = kinds(parsed, IMAGE)
    assert image.alt == "Bar chart of beam range by station"
    assert image.text == "Figure 1: Beam range by station"
    assert image.data.startswith(b"\x89PNG") and image.mime == "image/png"
    assert [t for t in texts(parsed) if t.startswith("- ")] == REPORT_ITEMS
    assert not any("Page" in b.text and "draft" in b.text for b in parsed.blocks)


# --- PowerPoint ------------------------------------------------------------------------


def make_pptx(tmp_path: Path) -> Path:
    deck = pptx.Presentation()
    deck.core_properties.title = ""
    first = deck.slides.add_slide(deck.slide_layouts[1])  # title and content
    first.shapes.title.text = "Quarterly Review"
    body = first.placeholders[1].text_frame
    body.text = "Revenue grew"
    sub = body.add_paragraph()
    sub.text = "in every region"
    sub.level = 1
    first.notes_slide.notes_text_frame.text = "Mention the hiring plan."
    second = deck.slides.add_slide(deck.slide_layouts[5])  # title only
    second.shapes.title.text = "Results"
    shape = second.shapes.add_table(3, 2, Inches(1), Inches(2), Inches(4), Inches(2))
    fill(shape.table.cell, [["Region", "Revenue"], ["North", "120"], ["South", "95"]])
    group = second.shapes.add_group_shape()
    pic = group.shapes.add_picture(io.BytesIO(PICTURE), Inches(1), Inches(5), Inches(2))
    pic.element.xpath("./p:nvPicPr/p:cNvPr")[0].set("descr", "Office map")
    third = deck.slides.add_slide(deck.slide_layouts[6])  # blank: no title
    for top, text in ((4, "Lower box"), (1, "Upper box")):
        box = third.shapes.add_textbox(Inches(1), Inches(top), Inches(4), Inches(1))
        box.text_frame.text = text
    deck.save(str(tmp_path / "deck.pptx"))
    return tmp_path / "deck.pptx"


@pytest.fixture(scope="module")
def deck(tmp_path_factory: pytest.TempPathFactory) -> Parsed:
    return office.read_pptx(make_pptx(tmp_path_factory.mktemp("pptx")), "deck.pptx")


def test_pptx_pages_titles_bullets_and_notes(deck: Parsed) -> None:
    assert deck.paged and deck.pages == 3
    assert deck.title == "Quarterly Review"  # no core title: the first slide's
    assert [b.kind for b in deck.blocks if b.page == 1] == [HEADING, TEXT, TEXT, TEXT]
    assert " | ".join(b.text for b in deck.blocks if b.page == 1) == (
        "Quarterly Review | - Revenue grew |   - in every region | Notes: Mention the hiring plan."
    )


def test_pptx_tables_pictures_in_groups_and_position_order(deck: Parsed) -> None:
    second = [b for b in deck.blocks if b.page == 2]
    assert [b.kind for b in second] == [HEADING, TABLE, IMAGE]
    assert second[1].rows == [["Region", "Revenue"], ["North", "120"], ["South", "95"]]
    assert second[2].data == PICTURE and second[2].alt == "Office map"
    third = [(b.kind, b.text) for b in deck.blocks if b.page == 3]
    assert third == [(TEXT, "Upper box"), (TEXT, "Lower box")]  # top to bottom, no title


def test_libreoffice_pptx_reads_like_the_deck() -> None:
    parsed = office.read_pptx(fixture("slides.pptx"), "slides.pptx")
    assert parsed.paged and parsed.pages == 3
    heads = [(b.page, b.text) for b in kinds(parsed, HEADING)]
    assert heads == [(1, "Quarterly Review"), (2, "Regional results"), (3, "Office map")]
    assert "- Revenue grew in every region" in texts(parsed)
    notes = [b for b in parsed.blocks if b.text.startswith("Notes:")]
    assert [(b.page, b.text) for b in notes] == [(1, "Notes: Mention the hiring plan.")]
    (table,) = kinds(parsed, TABLE)
    assert table.page == 2 and table.rows[0] == ["Region", "Revenue", "Growth"]
    assert ["South", "95", "7%"] in table.rows
    (image,) = kinds(parsed, IMAGE)
    assert image.page == 3 and image.alt == "Map of the new offices"
    assert image.data.startswith(b"\x89PNG")
    assert (3, "The Lisbon office opened in March.") in [(b.page, b.text) for b in parsed.blocks]


# --- spreadsheets ----------------------------------------------------------------------


def test_xlsx_sheets_become_headed_tables_with_readable_values(tmp_path: Path) -> None:
    book = openpyxl.Workbook()
    data = book.active
    data.title = "Data"
    data.append(["Name", "Count", "Ratio", "Since", None, None])
    data.append(["North", 120, 0.1 + 0.2, dt.datetime(2024, 3, 1), None, None])
    data.append([None, None, None, None])
    data.append(["South", 95.0, 2.5, dt.datetime(2024, 3, 1, 13, 45), None])
    book.create_sheet("Empty")
    book.create_sheet("Flags").append(["ok", True])
    book.properties.title = "Station book"
    path = tmp_path / "book.xlsx"
    book.save(path)
    parsed = sheets.read_xlsx(path, "book.xlsx")
    assert parsed.title == "Station book" and not parsed.paged
    assert [b.text for b in kinds(parsed, HEADING)] == ["Data", "Flags"]  # not "Empty"
    table, flags = kinds(parsed, TABLE)
    assert table.header_rows == 1 and table.rows[0] == ["Name", "Count", "Ratio", "Since"]
    assert table.rows[1] == ["North", "120", "0.3", "2024-03-01"]
    assert table.rows[2] == ["South", "95", "2.5", "2024-03-01T13:45:00"]
    assert flags.rows == [["ok", "TRUE"]]


def test_xlsx_rows_past_the_cap_are_warned_about(tmp_path: Path) -> None:
    book = openpyxl.Workbook(write_only=True)
    sheet = book.create_sheet("Log")
    for n in range(MAX_TABLE_ROWS + 5):
        sheet.append([n])
    path = tmp_path / "log.xlsx"
    book.save(path)
    parsed = sheets.read_xlsx(path, "log.xlsx")
    assert len(kinds(parsed, TABLE)[0].rows) == MAX_TABLE_ROWS
    assert parsed.warnings == [
        f"sheet 'Log': {MAX_TABLE_ROWS + 5} rows, only the first {MAX_TABLE_ROWS} read"
    ]


def test_libreoffice_xlsx_and_csv_read_the_same_employees() -> None:
    parsed = sheets.read_xlsx(fixture("sheet.xlsx"), "sheet.xlsx")
    assert [b.text for b in kinds(parsed, HEADING)] == ["Employees", "Budget"]
    employees, budget = kinds(parsed, TABLE)
    assert employees.rows[0] == ["Name", "Department", "City", "Start year"]
    assert ["Grace Hopper", "Engineering", "Arlington", "2017"] in employees.rows
    assert budget.rows[1:] == [["Research", "250000"], ["Engineering", "410000"]]
    (table,) = sheets.read_csv(fixture("sheet.csv"), "sheet.csv").blocks
    assert table.rows == employees.rows


def test_csv_dialect_is_sniffed_and_a_bom_is_dropped(tmp_path: Path) -> None:
    path = put(tmp_path, "semi.csv", '\ufeffName;Note\nNorth;"two\nlines"\n\nSouth;plain\n')
    parsed = sheets.read_csv(path, "semi.csv")
    assert parsed.title == ""
    (table,) = parsed.blocks
    assert table.kind == TABLE and table.header_rows == 1
    assert table.rows == [["Name", "Note"], ["North", "two lines"], ["South", "plain"]]


def test_csv_that_is_not_utf8_names_the_offset(tmp_path: Path) -> None:
    path = put(tmp_path, "latin.csv", "name,city\nZoë,Köln\n".encode("latin-1"))
    with pytest.raises(InputError) as err:
        sheets.read_csv(path, "latin.csv")
    assert err.value.reason == "not UTF-8 text (byte 0xEB at offset 12); save it as UTF-8"


def test_csv_rows_past_the_cap_are_counted_in_the_warning(tmp_path: Path) -> None:
    path = put(tmp_path, "long.csv", "n\n" + "".join(f"{n}\n" for n in range(MAX_TABLE_ROWS + 99)))
    parsed = sheets.read_csv(path, "long.csv")
    assert len(parsed.blocks[0].rows) == MAX_TABLE_ROWS
    assert parsed.warnings == [
        f"table: {MAX_TABLE_ROWS + 100} rows, only the first {MAX_TABLE_ROWS} read"
    ]


def test_docx_numbered_lists_read_as_word_numbers_them(tmp_path: Path) -> None:
    from ingest.documents.numbering import letters, roman

    document = docx.Document()
    for text in ("Unpack", "Mount", "Wire"):
        document.add_paragraph(text, style="List Number")
    document.add_paragraph("A remark between the steps.")
    document.add_paragraph("Power on", style="List Number")  # the same list counts on
    document.add_paragraph("Spare lamp", style="List Bullet")
    document.save(str(tmp_path / "steps.docx"))
    found = texts(office.read_docx(tmp_path / "steps.docx", "steps.docx"))
    assert found == [
        "1. Unpack", "2. Mount", "3. Wire", "A remark between the steps.", "4. Power on",
        "- Spare lamp",
    ]  # fmt: skip
    assert [roman(n) for n in (4, 9, 14, 1990)] == ["iv", "ix", "xiv", "mcmxc"]
    assert [letters(n) for n in (1, 26, 27)] == ["a", "z", "aa"]
