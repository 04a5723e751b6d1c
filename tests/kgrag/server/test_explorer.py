"""The graph explorer page (kgrag/server/explorer) in a real browser against a real
server on loopback: searches, the drawing, evidence, shared links, stored markup,
bearer tokens, several graphs, communities, global search; and its routes.

The browser is the system's chromium driven by Playwright (no browser download);
the browser tests fail when either is missing (.ci/run installs chromium).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from kgrag.server import Access, Graphs, Running, create_app
from kgrag.server.explorer import CSP, explorer_routes
from tests.conftest import DATA, SCIENCE, small_config
from tests.kgrag.server.served import serving

EVIL_TITLE = "Evil <script>window.__pwned=1</script>"
EVIL_MARKUP = '<img src=x onerror="window.__pwned=1">'
EVIL = {
    "title": EVIL_TITLE,
    "text": f"The Krakatoa volcano erupted in 1883. {EVIL_MARKUP} Krakatoa lies in Indonesia "
    "between Java and Sumatra.",
}
TOKEN = "s3cret-explorer"
WAIT = 30_000  # ms: the first search of a graph builds its searches
ASSETS = Path(__file__).parents[3] / "kgrag" / "server" / "explorer"


# -- graphs and servers -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus() -> list[dict[str, str]]:
    return [*json.loads(SCIENCE.read_text(encoding="utf-8")), EVIL]


@pytest.fixture(scope="module")
def folders(
    corpus: list[dict[str, str]], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """Two small graphs: ``lab`` (the science passages and one full of markup) and
    ``news``."""
    from ingest import ingest_paths

    root = tmp_path_factory.mktemp("explorer")
    source = root / "lab.json"
    source.write_text(json.dumps(corpus), encoding="utf-8")
    out = {"lab": root / "lab", "news": root / "news"}
    for name, files in (("lab", [source]), ("news", [DATA / "news.jsonl"])):
        report = ingest_paths(files, out[name], small_config())
        assert report.changed and not report.errors
    return out


@pytest.fixture(scope="module")
def graphs(folders: dict[str, Path]) -> Iterator[Graphs]:
    g = Graphs.open([f"{name}={path}" for name, path in folders.items()])
    yield g
    g.close()


@pytest.fixture(scope="module")
def server(graphs: Graphs) -> Iterator[Running]:
    with Running(create_app(graphs, routes=explorer_routes())) as running:
        yield running


@pytest.fixture(scope="module")
def guarded_server(graphs: Graphs) -> Iterator[Running]:
    app = create_app(graphs, access=Access(token=TOKEN), routes=explorer_routes())
    with Running(app) as running:
        yield running


def get(base: str, path: str, method: str = "GET", body: bytes | None = None) -> Any:
    host, port = base.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    conn.request(method, path, body, {"Content-Type": "application/json"} if body else {})
    resp = conn.getresponse()
    out = resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    conn.close()
    return out


# -- the routes ------------------------------------------------------------------------------


def test_the_page_and_its_assets_are_served_with_their_types_and_policy(server: Running):
    for path, kind, marker in (
        ("/", "text/html", b'<script src="explorer/explorer.js"'),
        ("/?q=x&op=local", "text/html", b"<title>kgrag explorer</title>"),
        ("/explorer/explorer.js", "text/javascript", b'"use strict"'),
        ("/explorer/explorer.css", "text/css", b"--entity"),
    ):
        status, headers, body = get(server.url, path)
        assert status == 200 and headers["content-type"].startswith(kind), (path, headers)
        assert headers["content-security-policy"] == CSP
        assert "script-src 'self'" in CSP and "unsafe" not in CSP
        assert headers["x-content-type-options"] == "nosniff"
        assert marker in body


def test_unknown_assets_are_404_and_the_api_stays_where_it_was(server: Running):
    for path in ("/explorer/nope.js", "/explorer/index.html", "/explorer/../http.py"):
        status, headers, _ = get(server.url, path)
        assert status == 404, path
    status, _, body = get(server.url, "/health")
    assert status == 200 and json.loads(body)["graphs"] == ["lab", "news"]
    call = {"jsonrpc": "2.0", "id": 1, "method": "retrieve", "params": {"query": "x", "k": 1}}
    status, _, body = get(
        server.url, "/graphs/news/rcp/retrieve", "POST", json.dumps(call).encode()
    )
    assert status == 200 and json.loads(body)["error"]["code"] == -32001  # not initialized
    status, _, body = get(server.url, "/nowhere")
    assert status == 404 and "not an RCP endpoint" in json.loads(body)["error"]


def test_the_page_is_served_without_the_token_but_the_api_is_not(guarded_server: Running):
    assert get(guarded_server.url, "/")[0] == 200
    assert get(guarded_server.url, "/explorer/explorer.js")[0] == 200
    status, _, body = get(guarded_server.url, "/health")  # alive, but names no graph
    assert status == 200 and json.loads(body) == {"status": "ok", "graphs": [], "auth": "required"}
    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    status, headers, _ = get(guarded_server.url, "/rcp/ping", "POST", ping)
    assert status == 401 and headers["www-authenticate"] == "Bearer"


class _Markup(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.problems: list[str] = []
        self.open_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = {k for k, _ in attrs}
        if "style" in names or any(k.startswith("on") for k in names) or tag == "style":
            self.problems.append(f"inline style or handler on <{tag}>")
        self.open_script = tag == "script"
        if tag == "script" and "src" not in names:
            self.problems.append("inline <script>")

    def handle_data(self, data: str) -> None:
        if self.open_script and data.strip():
            self.problems.append("script body")


def test_the_page_holds_no_inline_code_and_the_script_never_parses_markup():
    parser = _Markup()
    parser.feed((ASSETS / "index.html").read_text(encoding="utf-8"))
    assert parser.problems == []
    script = (ASSETS / "explorer.js").read_text(encoding="utf-8")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in script, sink
    assert "new Function" not in script and 'setAttribute("style"' not in script


def test_kgrag_serve_http_serves_the_page_and_keeps_the_api_behind_its_token(
    folders: dict[str, Path],
):
    env = dict(os.environ, KGRAG_TOKEN=TOKEN)
    explorer = r"the explorer on (http://[\d.]+:\d+)/"
    with serving("--graph", str(folders["news"]), env=env, listening=explorer) as server:
        base = server.url
        status, headers, body = get(base, "/")
        assert status == 200 and headers["content-security-policy"] == CSP
        assert b"kgrag explorer" in body
        ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
        assert get(base, "/rcp/ping", "POST", ping)[0] == 401


# -- the browser -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One chromium for the module (a persistent context: it takes the profile folder)."""
    from playwright import sync_api

    executable = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(executable).exists():  # a failure, not a skip: .ci/run installs it
        pytest.fail("no chromium here: apt-get install chromium (as .ci/run does)")
    with sync_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            user_data_dir=str(tmp_path_factory.mktemp("chromium")),
            executable_path=executable,
            headless=True,
            args=[
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
            viewport={"width": 1440, "height": 900},
        )
        context.set_default_timeout(WAIT)
        yield context
        context.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh tab (its own sessionStorage); fails the test on a script error or a
    Content-Security-Policy violation."""
    tab = browser.new_page()
    problems: list[str] = []
    tab.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    tab.on(
        "console",
        lambda msg: (
            problems.append(msg.text)
            if msg.type == "error" and "Content Security Policy" in msg.text
            else None
        ),
    )
    yield tab
    tab.close()
    assert problems == []


def expect(locator: Any) -> Any:
    from playwright.sync_api import expect as playwright_expect

    playwright_expect.set_options(timeout=WAIT)
    return playwright_expect(locator)


def search(page: Any, query: str, op: str) -> None:
    """Type a question, pick the search and wait for its answer."""
    page.fill("#q", query)
    page.select_option("#op", op)
    page.click("#go")
    expect(page.locator("#status")).to_have_class(re.compile(r"\bok\b"))


def titles(page: Any) -> list[str]:
    return [t.strip() for t in page.locator("#hits li.hit .hit-title").all_text_contents()]


def test_a_local_search_draws_its_paths_and_an_edge_shows_its_evidence(
    server: Running, page: Any, corpus: list[dict[str, str]], tmp_path: Path
):
    response = page.goto(server.url + "/")
    assert response.headers["content-security-policy"] == CSP
    assert response.headers["x-content-type-options"] == "nosniff"
    expect(page.locator("#status")).to_contain_text("Ready: 2 graphs")
    search(page, "Where was Marie Curie born?", "local")
    assert "Marie Curie" in titles(page)[:3]
    assert page.locator("#hits li.unit-path").count() > 0
    assert re.search(r"[?&]q=Where\+was\+Marie\+Curie\+born%3F&op=local", page.url)
    relations = page.locator("#canvas .edge.relation")
    assert relations.count() > 0
    page.screenshot(path=tmp_path / "local.png")

    relations.first.locator(".edge-label").click()
    detail = page.locator("#detail")
    expect(detail.locator(".passage-title")).to_be_visible()
    shown = detail.locator(".passage-text").text_content().strip()
    assert any(shown in doc["text"] for doc in corpus), shown  # a stored passage, verbatim
    ends = [s.strip() for s in detail.locator(".says strong").all_text_contents()]
    marked = {m.strip().lower() for m in detail.locator("mark").all_text_contents()}
    assert marked and marked <= {e.lower() for e in ends}
    page.screenshot(path=tmp_path / "evidence.png")

    before = page.locator("#canvas .node").count()
    page.locator("#canvas .node.entity").first.click()
    expect(detail).to_contain_text("neighbours added")
    assert page.locator("#canvas .node").count() > before
    assert page.locator("#canvas .node.expanded").count() == 1
    page.screenshot(path=tmp_path / "expanded.png")


def test_a_shared_link_runs_its_search_on_load(server: Running, page: Any, tmp_path: Path):
    page.goto(server.url + "/?q=Who+married+Pierre+Curie%3F&op=local&graph=lab")
    expect(page.locator("#status")).to_have_class(re.compile(r"\bok\b"))
    assert page.input_value("#q") == "Who married Pierre Curie?"
    assert page.input_value("#op") == "local" and page.input_value("#graph") == "lab"
    assert page.locator("#hits li.hit").count() > 0
    assert page.locator("#canvas .edge").count() > 0
    page.goto(server.url + "/?q=Which+river+flows+into+the+Black+Sea%3F")  # op: local
    expect(page.locator("#status")).to_have_class(re.compile(r"\bok\b"))
    assert page.input_value("#op") == "local" and "Danube" in titles(page)[:3]
    page.screenshot(path=tmp_path / "shared.png")


def test_stored_markup_is_shown_as_text_and_never_runs(server: Running, page: Any, tmp_path: Path):
    page.goto(server.url + "/?q=Krakatoa+volcano+eruption&op=retrieve")
    expect(page.locator("#status")).to_have_class(re.compile(r"\bok\b"))
    first = page.locator("#hits li.hit").first
    assert first.locator(".hit-title").text_content() == EVIL_TITLE
    assert EVIL_MARKUP in first.locator(".snippet").text_content()
    search(page, "Krakatoa volcano eruption", "local")
    assert titles(page)[0] == EVIL_TITLE
    page.locator("#hits li.unit-chunk").first.locator("button", has_text="explore").click()
    expect(page.locator("#detail")).to_contain_text("neighbours added")
    assert page.locator("#detail .passage-title").text_content() == EVIL_TITLE
    names = page.locator("#canvas .node-label").all_text_contents()
    assert any(name.startswith("Evil <script>") for name in names), names  # SVG text, verbatim
    assert page.locator("#hits img, #hits script, #detail img, #canvas script").count() == 0
    assert page.evaluate("typeof window.__pwned") == "undefined"
    page.screenshot(path=tmp_path / "markup.png")


def test_a_server_with_a_token_asks_for_it_and_refuses_a_wrong_one(
    guarded_server: Running, page: Any, tmp_path: Path
):
    sent: list[str | None] = []
    page.on(
        "request",
        lambda r: (
            sent.append(r.headers.get("authorization"))
            if "/rcp/" in r.url or r.url.endswith("/health")
            else None
        ),
    )
    page.goto(guarded_server.url + "/?q=Where+was+Marie+Curie+born%3F&op=retrieve")
    panel = page.locator("#token-panel")
    expect(panel).to_be_visible()
    expect(page.locator("#token-message")).to_contain_text("needs a bearer token")
    assert page.locator("#graph option").count() == 0  # no graph is named without the token
    page.fill("#token", "not-the-token")
    page.press("#token", "Enter")
    expect(page.locator("#token-message")).to_contain_text("refused")
    expect(page.locator("#status")).to_have_class(re.compile(r"\berror\b"))
    page.screenshot(path=tmp_path / "token-refused.png")
    page.fill("#token", TOKEN)
    page.press("#token", "Enter")
    expect(page.locator("#status")).to_have_class(re.compile(r"\bok\b"))
    expect(panel).to_be_hidden()
    assert page.locator("#graph option").count() == 2
    assert "Marie Curie" in titles(page)[:3]
    assert f"Bearer {TOKEN}" in sent and "Bearer not-the-token" in sent
    assert TOKEN not in page.url
    assert page.evaluate("sessionStorage.getItem('kgrag.explorer.token')") == TOKEN
    page.screenshot(path=tmp_path / "token.png")


def test_the_graph_picker_switches_graphs_and_keeps_the_choice_in_the_url(
    server: Running, page: Any, tmp_path: Path
):
    news = [json.loads(line)["title"] for line in (DATA / "news.jsonl").read_text().splitlines()]
    page.goto(server.url + "/?q=harbour+bridge+opened&op=retrieve")
    expect(page.locator("#status")).to_have_class(re.compile(r"\bok\b"))
    assert not set(titles(page)) & set(news)
    page.select_option("#graph", "news")
    expect(page.locator("#hits li.hit .hit-title").first).to_have_text("Harbour bridge opens")
    assert set(titles(page)) <= set(news)
    assert "graph=news" in page.url
    page.goto(page.url)
    expect(page.locator("#status")).to_have_class(re.compile(r"\bok\b"))
    assert page.input_value("#graph") == "news" and titles(page)[0] == "Harbour bridge opens"
    page.screenshot(path=tmp_path / "picker.png")


def test_the_communities_view_pages_levels_members_and_passages(
    server: Running, graphs: Graphs, page: Any, tmp_path: Path
):
    stored = list(graphs.get("lab").reader.communities())
    page.goto(server.url + "/")
    expect(page.locator("#status")).to_contain_text("Ready")
    page.click("#tab-communities")
    cards = page.locator("#communities li.community")
    more = page.locator("#more")
    expect(cards.first).to_be_visible()
    while more.is_visible():  # page by page, with the cursor
        shown = cards.count()
        more.click()
        expect(cards).not_to_have_count(shown)
    ids = cards.evaluate_all("cards => cards.map(c => c.dataset.id)")
    assert sorted(ids) == sorted(c.id for c in stored)
    assert "view=communities" in page.url
    levels = sorted({c.level for c in stored})
    options = page.locator("#level option").all_text_contents()
    assert options[0] == "all levels" and len(options) == len(levels) + 1
    page.select_option("#level", "0")
    expect(page.locator("#comm-status")).to_contain_text("level 0")
    finest = {c.id for c in stored if c.level == 0}
    ids = cards.evaluate_all("cards => cards.map(c => c.dataset.id)")
    assert set(ids) == finest or (len(ids) == 20 and set(ids) < finest)
    card = cards.first
    card.locator("button", has_text="members").click()
    chips = card.locator(".community-details .chip.entity")
    expect(chips.first).to_be_visible()
    community = next(c for c in stored if c.id == ids[0])
    names = {e.name for e in graphs.get("lab").reader.entities(list(community.members))}
    assert set(chips.all_text_contents()) == names
    assert card.locator(".community-details .chip.passage").count() == len(community.leaves)
    page.screenshot(path=tmp_path / "communities.png", full_page=True)


def test_neighbours_are_asked_of_the_version_that_drew_them(
    folders: dict[str, Path], page: Any, tmp_path: Path
):
    """A write publishes a new version after a drawing: expanding a drawn entity asks the
    ``neighbors`` op of the drawing's ``indexVersion`` (the new version may no longer
    hold its ids), and the neighbours are drawn."""
    copy = tmp_path / "lab"
    shutil.copytree(folders["lab"], copy)
    g = Graphs.open([f"lab={copy}"])
    try:
        with Running(create_app(g, routes=explorer_routes())) as running:
            engine = g.get("lab")
            drawn = engine.index_version
            page.goto(running.url + "/")
            search(page, "Where was Marie Curie born?", "local")
            expect(page.locator("#status")).to_contain_text(f"index {drawn}")
            curie = [d.id for d in engine.reader.documents() if d.title == "Marie Curie"]
            assert engine.delete(curie)["deleted"] == 1  # a new version, without her page
            assert engine.index_version != drawn
            asked: list[dict[str, Any]] = []

            def seen(request: Any) -> None:
                body = request.post_data_json if request.method == "POST" else None
                if isinstance(body, dict) and body.get("method") == "graph":
                    asked.append(body["params"])

            page.on("request", seen)
            page.locator("#canvas .node.entity").first.click()
            expect(page.locator("#detail")).to_contain_text("neighbours added")
            calls = [p for p in asked if p.get("op") == "neighbors"]
            assert calls and all(p.get("indexVersion") == drawn for p in calls), asked
    finally:
        g.close()


def test_global_search_shows_its_summary_with_the_communities_it_cites(
    server: Running, graphs: Graphs, page: Any, tmp_path: Path
):
    query = "physicists and the Nobel Prize"
    expected = graphs.get("lab").graph({"op": "global", "query": query, "k": 10})
    page.goto(server.url + "/")
    expect(page.locator("#status")).to_contain_text("Ready")
    search(page, query, "global")
    summary = page.locator("#summary .summary-text")
    expect(summary).to_be_visible()
    plain = re.sub(r"\s*\[m:[^\]]+\]", "", expected["summary"])
    shown = re.sub(r"\s*\[\d+\]", "", summary.text_content())
    assert " ".join(shown.split()) == " ".join(plain.split())
    cited = page.locator("#summary .cite")
    assert cited.count() == expected["summary"].count("[m:")
    cards = page.locator("#hits li.community")
    assert cards.evaluate_all("cs => cs.map(c => c.dataset.id)") == [
        c["id"] for c in expected["communities"]
    ]
    page.screenshot(path=tmp_path / "global.png")
    search(page, "Where was Marie Curie born?", "drift")
    assert page.locator("#summary .followups li").count() > 0
    assert page.locator("#hits li.hit").count() > 0
    page.screenshot(path=tmp_path / "drift.png")


# -- documents: tables, pictures, files, sections and pages ---------------------------------


@pytest.fixture(scope="module")
def docs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """A graph of LibreOffice-made documents (tests/data/docs), served with the page."""
    from ingest import ingest_paths

    docs = DATA / "docs"
    folder = tmp_path_factory.mktemp("docs") / "kb"
    folder.mkdir()
    for name in ("report.pdf", "sheet.xlsx"):
        shutil.copy(docs / name, folder / name)
    graph = folder.parent / "graph"
    report = ingest_paths([folder], graph, small_config())
    assert report.changed and not report.errors
    g = Graphs.open([f"kb={graph}"])
    with Running(create_app(g, routes=explorer_routes())) as running:
        yield running
    g.close()


def test_document_hits_show_their_table_picture_file_section_and_page(
    docs_server: Running, page: Any, tmp_path: Path
):
    page.goto(docs_server.url + "/?q=Skerryvore+station+height+first+lit&op=retrieve")
    expect(page.locator("#status")).to_have_class(re.compile(r"\bok\b"))
    table = page.locator("#hits li.hit .hit-table").first
    expect(table).to_be_visible()
    assert table.locator("th").all_text_contents()[:2] == ["Station", "Region"]
    assert ["Skerryvore", "Inner Hebrides", "48", "1844"] in [
        r.locator("td").all_text_contents() for r in table.locator("tr").all()
    ]
    card = page.locator("#hits li.hit", has=page.locator(".hit-table")).first
    assert card.locator(".from-file").text_content() == "report.pdf"
    assert (
        card.locator(".from-section").text_content() == "Lighthouse Survey 2024 › Coastal stations"
    )
    assert card.locator(".from-page").text_content() == "p. 1"
    page.screenshot(path=tmp_path / "table.png")

    search(page, "bar chart of beam range by station figure", "retrieve")
    picture = page.locator("#hits li.hit img.hit-image").first
    expect(picture).to_be_visible()
    page.wait_for_function(
        "() => [...document.querySelectorAll('img.hit-image')].some(i => i.naturalWidth > 0)"
    )
    assert picture.get_attribute("src").startswith("data:image/png;base64,")
    page.screenshot(path=tmp_path / "picture.png")
