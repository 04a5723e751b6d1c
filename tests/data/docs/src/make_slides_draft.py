"""Write a DRAFT deck to /tmp/slides_draft/slides.pptx with python-pptx.

The committed ../slides.pptx is LibreOffice's re-save of this draft:
    python make_slides_draft.py
    soffice --headless --convert-to pptx --outdir .. /tmp/slides_draft/slides.pptx
"""
import os
from pptx import Presentation
from pptx.util import Cm, Pt

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = "/tmp/slides_draft"

prs = Presentation()  # default 4:3 template

# Slide 1: title + bullets + speaker notes
s1 = prs.slides.add_slide(prs.slide_layouts[1])  # Title and Content
s1.shapes.title.text = "Quarterly Review"
body = s1.placeholders[1].text_frame
body.text = "Revenue grew in every region"
body.add_paragraph().text = "Two new offices opened"
s1.notes_slide.notes_text_frame.text = "Mention the hiring plan."

# Slide 2: title + a real table
s2 = prs.slides.add_slide(prs.slide_layouts[5])  # Title Only
s2.shapes.title.text = "Regional results"
rows = [["Region", "Revenue", "Growth"],
        ["North", "120", "4%"],
        ["South", "95", "7%"],
        ["West", "143", "2%"]]
tbl = s2.shapes.add_table(len(rows), 3, Cm(3), Cm(5), Cm(19), Cm(6)).table
for r, row in enumerate(rows):
    for c, val in enumerate(row):
        tbl.cell(r, c).text = val

# Slide 3: title + picture with alt text + text box
s3 = prs.slides.add_slide(prs.slide_layouts[5])
s3.shapes.title.text = "Office map"
pic = s3.shapes.add_picture(os.path.join(HERE, "beam.png"), Cm(4.5), Cm(5), Cm(16), Cm(8))
pic._element.nvPicPr.cNvPr.set("descr", "Map of the new offices")
tb = s3.shapes.add_textbox(Cm(4.5), Cm(14), Cm(16), Cm(1.5))
tb.text_frame.text = "The Lisbon office opened in March."
tb.text_frame.paragraphs[0].runs[0].font.size = Pt(24)

os.makedirs(OUT_DIR, exist_ok=True)
prs.save(os.path.join(OUT_DIR, "slides.pptx"))
print("wrote", os.path.join(OUT_DIR, "slides.pptx"))
