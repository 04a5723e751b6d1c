#!/bin/sh
# Regenerate every file in tests/data/docs/ from the sources in this folder.
# Run from tests/data/docs:   sh src/make_all.sh
# Needs: python3 with Pillow + python-pptx (the repo .venv), LibreOffice 7.4
# (soffice), poppler-utils (pdftoppm), img2pdf, qpdf.
set -eu
ROOT=$(cd "$(dirname "$0")/../../../.." && pwd)
PY=${PY:-$ROOT/.venv/bin/python}
SOFFICE="soffice -env:UserInstallation=file:///tmp/lo_profile --headless"

# 1. figure + sources (report.html, report.fodt embed beam.png)
(cd src && $PY make_beam.py && $PY build_sources.py)

# 2. report.pdf / report.docx from the flat ODT
$SOFFICE --convert-to 'pdf:writer_pdf_Export:{"ExportBookmarks":{"type":"boolean","value":"true"}}' --outdir . src/report.fodt
$SOFFICE --convert-to 'docx:MS Word 2007 XML' --outdir . src/report.fodt

# 3. report_export.html (+ its image file) = LibreOffice Writer HTML export
rm -rf /tmp/kgrag_htmlx && mkdir -p /tmp/kgrag_htmlx
cp src/report.fodt /tmp/kgrag_htmlx/report_export.fodt
$SOFFICE --convert-to html --outdir /tmp/kgrag_htmlx /tmp/kgrag_htmlx/report_export.fodt
rm -f report_export_html_*.png
cp /tmp/kgrag_htmlx/report_export.html /tmp/kgrag_htmlx/report_export_html_*.png .

# 4. scanned.pdf (image-only) and scan.png (top of page 1)
pdftoppm -r 150 -png -f 1 -l 1 -singlefile report.pdf /tmp/kgrag_page1
img2pdf /tmp/kgrag_page1.png -o scanned.pdf
pdftoppm -r 150 -png -f 1 -l 1 -x 0 -y 0 -W 1241 -H 450 -singlefile report.pdf scan

# 5. slides.pptx = LibreOffice re-save of a python-pptx draft
$PY src/make_slides_draft.py
$SOFFICE --convert-to pptx --outdir . /tmp/slides_draft/slides.pptx

# 6. sheet.xlsx from the flat ODS (sheet.csv is hand-written, not generated)
$SOFFICE --convert-to 'xlsx:Calc MS Excel 2007 XML' --outdir . src/sheet.fods

# 7. broken files
rm -f encrypted.pdf
qpdf --encrypt secret secret 256 -- report.pdf encrypted.pdf
S=$(stat -c %s report.pdf); head -c $((S * 40 / 100)) report.pdf > truncated.pdf
yes 'This file is not a zip archive; it only pretends to be a Word document.' | head -c 3000 > corrupt.docx
: > empty.pdf
X=$(stat -c %s sheet.xlsx); head -c $((X / 2)) sheet.xlsx > broken.xlsx
