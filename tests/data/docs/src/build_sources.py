"""Write src/report.html and src/report.fodt from one content list.

Run from tests/data/docs/src:  python build_sources.py
(needs beam.png from make_beam.py; uses only the standard library).
The .fodt is flat ODF XML that LibreOffice turns into report.pdf / report.docx.
"""
import base64
from html import escape

TITLE = "Lighthouse Survey 2024"
FOOTER = "Lighthouse Survey 2024 \u2014 draft"

TABLE_CAPTION = "Table 1: Stations inspected"
TABLE = [
    ["Station", "Region", "Height (m)", "First lit"],
    ["Skerryvore", "Inner Hebrides", "48", "1844"],
    ["Bell Rock", "Angus", "35", "1811"],
    ["Muckle Flugga", "Shetland", "20", "1858"],
    ["Ardnamurchan", "Lochaber", "36", "1849"],
]
FIG_ALT = "Bar chart of beam range by station"
FIG_CAPTION = "Figure 1: Beam range by station"

MAINT_PROSE = [
    "Routine maintenance at an automated lighthouse is planned around the weather "
    "rather than the calendar. Crews travel to the rock stations by helicopter or by "
    "boat when the sea allows, and a visit that is postponed by a gale may be "
    "rescheduled several times before a safe landing can be made. Each visit follows "
    "a written checklist so that nothing is missed when the time on the station is "
    "short.",
    "The lens and the lantern glazing are cleaned on every visit. Salt spray, sea "
    "bird droppings and condensation all reduce the range of the light, and a film of "
    "salt that is barely visible from inside the lantern can noticeably weaken the "
    "beam seen by a ship several miles away. The glazing is washed with fresh water "
    "and dried by hand, and any cracked panes are recorded so that replacements can "
    "be brought out on the next visit.",
    "Electrical equipment is inspected next. The technicians test the lamp changer, "
    "the batteries, the solar panels or generators that charge them, and the "
    "monitoring equipment that reports faults to the shore. Batteries are checked for "
    "swelling and corrosion, cable runs are inspected for chafing where they pass "
    "through walls, and the results of each test are written into the station log "
    "before the crew moves on to the next task on the list.",
    "The fabric of the tower needs attention as well. Stone and brick towers are "
    "inspected for cracked pointing and loose masonry, and cast iron towers for rust "
    "and failed paint. Doors, window shutters and hatches are opened and closed to "
    "make sure that they still seal against driven rain, because water that gets into "
    "a tower during a winter storm can damage the equipment in the rooms below the "
    "lantern long before anyone returns to see it. Landing stages, handrails and "
    "steps are checked at the same time, since a damaged landing can make the next "
    "visit impossible. Where repairs are larger than a visiting crew can manage, the "
    "inspector records the defect with photographs and measurements so that a "
    "separate works party can be planned for the summer, when longer stays on the "
    "rock are possible and materials can be landed in calmer water.",
    "Keepers' cottages and store buildings at shore stations are treated in the same "
    "way. Many of them are now let to tenants or used as visitor centres, and the "
    "Board still has to keep the parts of the site that carry navigation equipment "
    "secure and in good repair. Access arrangements are agreed with tenants in "
    "advance so that maintenance crews can reach the tower without delay.",
    "Records are an essential part of the work. Every visit produces a short report "
    "that lists the tasks completed, the faults found and the parts replaced. These "
    "reports are gathered centrally and compared from year to year, which makes it "
    "possible to see when a component is failing more often than expected and to "
    "plan its replacement across the whole fleet of stations instead of repairing it "
    "again and again.",
    "Finally, the crew confirms that the light is showing its correct character "
    "before leaving. The flashing pattern of each lighthouse is listed in the "
    "official light lists and printed on nautical charts, and mariners depend on it "
    "to identify the station at night. A light that shows the wrong character can be "
    "more dangerous than one that is out, so the check is made by timing the flashes "
    "and comparing them with the published description.",
]

SECTIONS = [
    ("h1", TITLE),
    ("p", "This survey records the coastal lighthouses inspected by the Northern "
          "Lights Board during the spring of 2024."),
    ("h2", "Coastal stations"),
    ("p", "The Skerryvore lighthouse stands on a reef eleven miles southwest of Tiree "
          "and was completed in 1844."),
    ("table", None),
    ("figure", None),
    ("h2-break", "Maintenance"),
    ("p", "The lantern at Bell Rock was replaced with an LED array in 2021."),
    ("ul", ["Clean the lens", "Check the fog signal", "Log the keeper's report"]),
] + [("p", t) for t in MAINT_PROSE] + [
    ("h3", "Fog signals"),
    ("p", "Muckle Flugga's fog signal was decommissioned in 1987 after the station "
          "was automated."),
]


# ---------------------------------------------------------------- HTML
def build_html():
    out = ['<!DOCTYPE html>', '<html lang="en">', '<head>',
           '<meta charset="utf-8">', f'<title>{TITLE}</title>', '<style>',
           'table { border-collapse: collapse; }',
           'th, td { border: 1px solid black; padding: 4px 8px; }',
           'h2.newpage { page-break-before: always; break-before: page; }',
           '</style>', '</head>', '<body>']
    for kind, val in SECTIONS:
        if kind == "h1":
            out.append(f"<h1>{escape(val)}</h1>")
        elif kind == "h2":
            out.append(f"<h2>{escape(val)}</h2>")
        elif kind == "h2-break":
            out.append(f'<h2 class="newpage" style="page-break-before: always">{escape(val)}</h2>')
        elif kind == "h3":
            out.append(f"<h3>{escape(val)}</h3>")
        elif kind == "p":
            out.append(f"<p>{escape(val)}</p>")
        elif kind == "ul":
            out.append("<ul>" + "".join(f"<li>{escape(i)}</li>" for i in val) + "</ul>")
        elif kind == "table":
            out.append('<table border="1">')
            out.append(f"<caption>{escape(TABLE_CAPTION)}</caption>")
            out.append("<tr>" + "".join(f"<th>{escape(c)}</th>" for c in TABLE[0]) + "</tr>")
            for row in TABLE[1:]:
                out.append("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>")
            out.append("</table>")
        elif kind == "figure":
            out.append("<figure>")
            out.append(f'<img src="beam.png" width="400" height="200" alt="{escape(FIG_ALT)}">')
            out.append(f"<figcaption>{escape(FIG_CAPTION)}</figcaption>")
            out.append("</figure>")
    out += ["</body>", "</html>", ""]
    with open("report.html", "w", encoding="utf-8") as f:
        f.write("\n".join(out))


# ---------------------------------------------------------------- FODT
def x(s):
    return escape(s, quote=True)


FODT_HEAD = """<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
 xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0"
 xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"
 xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0"
 xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
 xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0"
 xmlns:xlink="http://www.w3.org/1999/xlink"
 xmlns:dc="http://purl.org/dc/elements/1.1/"
 xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0"
 xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0"
 office:version="1.3" office:mimetype="application/vnd.oasis.opendocument.text">
 <office:meta>
  <dc:title>{title}</dc:title>
  <meta:initial-creator>kgrag authors</meta:initial-creator>
  <dc:creator>kgrag authors</dc:creator>
  <dc:language>en-GB</dc:language>
 </office:meta>
 <office:font-face-decls>
  <style:font-face style:name="Liberation Serif" svg:font-family="'Liberation Serif'" style:font-family-generic="roman"/>
  <style:font-face style:name="Liberation Sans" svg:font-family="'Liberation Sans'" style:font-family-generic="swiss"/>
 </office:font-face-decls>
 <office:styles>
  <style:default-style style:family="paragraph">
   <style:paragraph-properties fo:orphans="2" fo:widows="2"/>
   <style:text-properties style:font-name="Liberation Serif" fo:font-size="12pt" fo:language="en" fo:country="GB"/>
  </style:default-style>
  <style:style style:name="Standard" style:family="paragraph" style:class="text"/>
  <style:style style:name="Text_20_body" style:display-name="Text body" style:family="paragraph" style:parent-style-name="Standard" style:class="text">
   <style:paragraph-properties fo:margin-top="0cm" fo:margin-bottom="0.25cm" fo:line-height="115%" fo:text-align="justify"/>
  </style:style>
  <style:style style:name="Heading" style:family="paragraph" style:parent-style-name="Standard" style:next-style-name="Text_20_body" style:class="text">
   <style:paragraph-properties fo:margin-top="0.42cm" fo:margin-bottom="0.21cm" fo:keep-with-next="always"/>
   <style:text-properties style:font-name="Liberation Sans" fo:font-weight="bold"/>
  </style:style>
  <style:style style:name="Heading_20_1" style:display-name="Heading 1" style:family="paragraph" style:parent-style-name="Heading" style:next-style-name="Text_20_body" style:default-outline-level="1" style:class="text">
   <style:text-properties fo:font-size="22pt" fo:font-weight="bold"/>
  </style:style>
  <style:style style:name="Heading_20_2" style:display-name="Heading 2" style:family="paragraph" style:parent-style-name="Heading" style:next-style-name="Text_20_body" style:default-outline-level="2" style:class="text">
   <style:text-properties fo:font-size="17pt" fo:font-weight="bold"/>
  </style:style>
  <style:style style:name="Heading_20_3" style:display-name="Heading 3" style:family="paragraph" style:parent-style-name="Heading" style:next-style-name="Text_20_body" style:default-outline-level="3" style:class="text">
   <style:text-properties fo:font-size="14pt" fo:font-weight="bold"/>
  </style:style>
  <style:style style:name="Caption" style:family="paragraph" style:parent-style-name="Standard" style:class="extra">
   <style:paragraph-properties fo:margin-top="0.21cm" fo:margin-bottom="0.21cm"/>
   <style:text-properties fo:font-size="11pt" fo:font-style="italic"/>
  </style:style>
  <style:style style:name="Table_20_Contents" style:display-name="Table Contents" style:family="paragraph" style:parent-style-name="Standard" style:class="extra"/>
  <style:style style:name="Table_20_Heading" style:display-name="Table Heading" style:family="paragraph" style:parent-style-name="Table_20_Contents" style:class="extra">
   <style:paragraph-properties fo:text-align="center"/>
   <style:text-properties fo:font-weight="bold"/>
  </style:style>
  <style:style style:name="List_20_Bullet" style:display-name="List Bullet" style:family="paragraph" style:parent-style-name="Text_20_body" style:class="list"/>
  <style:style style:name="Footer" style:family="paragraph" style:parent-style-name="Standard" style:class="extra">
   <style:paragraph-properties>
    <style:tab-stops><style:tab-stop style:position="17cm" style:type="right"/></style:tab-stops>
   </style:paragraph-properties>
   <style:text-properties fo:font-size="9pt"/>
  </style:style>
  <text:outline-style style:name="Outline">
   <text:outline-level-style text:level="1" style:num-format=""/>
   <text:outline-level-style text:level="2" style:num-format=""/>
   <text:outline-level-style text:level="3" style:num-format=""/>
  </text:outline-style>
  <text:list-style style:name="Bullets">
   <text:list-level-style-bullet text:level="1" text:bullet-char="\u2022">
    <style:list-level-properties text:list-level-position-and-space-mode="label-alignment">
     <style:list-level-label-alignment text:label-followed-by="listtab" text:list-tab-stop-position="1.27cm" fo:text-indent="-0.635cm" fo:margin-left="1.27cm"/>
    </style:list-level-properties>
   </text:list-level-style-bullet>
  </text:list-style>
 </office:styles>
 <office:automatic-styles>
  <style:style style:name="PBreak" style:family="paragraph" style:parent-style-name="Heading_20_2">
   <style:paragraph-properties fo:break-before="page"/>
  </style:style>
  <style:style style:name="PCenter" style:family="paragraph" style:parent-style-name="Standard">
   <style:paragraph-properties fo:text-align="center"/>
  </style:style>
  <style:style style:name="PCaption" style:family="paragraph" style:parent-style-name="Caption">
   <style:paragraph-properties fo:text-align="center"/>
  </style:style>
  <style:style style:name="Tbl" style:family="table">
   <style:table-properties style:width="14cm" table:align="center"/>
  </style:style>
  <style:style style:name="TblCol" style:family="table-column">
   <style:table-column-properties style:column-width="3.5cm"/>
  </style:style>
  <style:style style:name="TblCell" style:family="table-cell">
   <style:table-cell-properties fo:padding="0.1cm" fo:border="0.5pt solid #000000"/>
  </style:style>
  <style:style style:name="TblHeadCell" style:family="table-cell">
   <style:table-cell-properties fo:padding="0.1cm" fo:border="0.5pt solid #000000" fo:background-color="#dddddd"/>
  </style:style>
  <style:page-layout style:name="pm1">
   <style:page-layout-properties fo:page-width="21cm" fo:page-height="29.7cm" fo:margin-top="2cm" fo:margin-bottom="1.5cm" fo:margin-left="2cm" fo:margin-right="2cm"/>
   <style:footer-style>
    <style:header-footer-properties fo:min-height="0.6cm" fo:margin-top="0.4cm"/>
   </style:footer-style>
  </style:page-layout>
 </office:automatic-styles>
 <office:master-styles>
  <style:master-page style:name="Standard" style:page-layout-name="pm1">
   <style:footer>
    <text:p text:style-name="Footer">{footer}<text:tab/>Page <text:page-number text:select-page="current">1</text:page-number> of <text:page-count>3</text:page-count></text:p>
   </style:footer>
  </style:master-page>
 </office:master-styles>
 <office:body>
  <office:text>
"""

FODT_TAIL = """  </office:text>
 </office:body>
</office:document>
"""


def build_fodt():
    with open("beam.png", "rb") as f:
        b64 = base64.b64encode(f.read()).decode("ascii")
    body = []
    for kind, val in SECTIONS:
        if kind in ("h1", "h2", "h3"):
            lvl = kind[1]
            body.append(f'   <text:h text:style-name="Heading_20_{lvl}" text:outline-level="{lvl}">{x(val)}</text:h>')
        elif kind == "h2-break":
            body.append(f'   <text:h text:style-name="PBreak" text:outline-level="2">{x(val)}</text:h>')
        elif kind == "p":
            body.append(f'   <text:p text:style-name="Text_20_body">{x(val)}</text:p>')
        elif kind == "ul":
            body.append('   <text:list text:style-name="Bullets">')
            for item in val:
                body.append(f'    <text:list-item><text:p text:style-name="List_20_Bullet">{x(item)}</text:p></text:list-item>')
            body.append('   </text:list>')
        elif kind == "table":
            body.append(f'   <text:p text:style-name="Caption">{x(TABLE_CAPTION)}</text:p>')
            body.append('   <table:table table:name="Stations" table:style-name="Tbl">')
            body.append('    <table:table-column table:style-name="TblCol" table:number-columns-repeated="4"/>')
            body.append('    <table:table-header-rows>')
            body.append('     <table:table-row>' + "".join(
                f'<table:table-cell table:style-name="TblHeadCell" office:value-type="string"><text:p text:style-name="Table_20_Heading">{x(c)}</text:p></table:table-cell>'
                for c in TABLE[0]) + '</table:table-row>')
            body.append('    </table:table-header-rows>')
            for row in TABLE[1:]:
                body.append('    <table:table-row>' + "".join(
                    f'<table:table-cell table:style-name="TblCell" office:value-type="string"><text:p text:style-name="Table_20_Contents">{x(c)}</text:p></table:table-cell>'
                    for c in row) + '</table:table-row>')
            body.append('   </table:table>')
        elif kind == "figure":
            body.append('   <text:p text:style-name="PCenter"><draw:frame draw:name="BeamChart" text:anchor-type="as-char" svg:width="10cm" svg:height="5cm">'
                        f'<draw:image><office:binary-data>{b64}</office:binary-data></draw:image>'
                        f'<svg:title>{x(FIG_ALT)}</svg:title><svg:desc>{x(FIG_ALT)}</svg:desc>'
                        '</draw:frame></text:p>')
            body.append(f'   <text:p text:style-name="PCaption">{x(FIG_CAPTION)}</text:p>')
    with open("report.fodt", "w", encoding="utf-8") as f:
        f.write(FODT_HEAD.format(title=x(TITLE), footer=x(FOOTER)))
        f.write("\n".join(body) + "\n")
        f.write(FODT_TAIL)


if __name__ == "__main__":
    build_html()
    build_fodt()
