// kgrag explorer: search a served graph over RCP/1 and draw what it finds.
// Stored text is data: it reaches the page only through textContent, text nodes and
// attribute values, never through markup parsing.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const SVGNS = "http://www.w3.org/2000/svg";
  const TOKEN_KEY = "kgrag.explorer.token";
  const OPS = ["local", "retrieve", "global", "drift"];
  const DEFAULT_K = 10;
  const NEIGHBOURS = 15;
  const COMMUNITY_PAGE = 20;
  const SNIPPET = 320;

  const state = {
    token: sessionStorage.getItem(TOKEN_KEY) || "",
    graphs: [],
    graph: null,
    sessions: new Map(), // graph -> {key, ready}
    labels: new Map(), // node id -> display name
    passages: new Map(), // chunk id -> {title, text}
    nodes: new Map(),
    edges: new Map(),
    lit: null, // edge keys of the highlighted path
    u: 1, // user units per screen pixel: nodes and labels keep their size when zoomed
    selected: null,
    pending: null, // what to run again once a token is given
    version: null, // the index version of the drawing: its ids are asked of it
    searchSeq: 0,
    rpcSeq: 0,
    communities: { cursor: null, top: null, seq: 0 },
    view: null,
  };

  // -- DOM helpers --------------------------------------------------------------------------

  function el(tag, props = {}, ...kids) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props)) {
      if (value == null || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = String(value);
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const kid of kids.flat()) if (kid != null && kid !== false) node.append(kid);
    return node;
  }

  /** Replace ``node``'s children with ``kids``, skipping the absent ones. */
  function put(node, ...kids) {
    node.replaceChildren(...kids.flat().filter((kid) => kid != null && kid !== false));
    return node;
  }

  function sv(tag, attrs = {}) {
    const node = document.createElementNS(SVGNS, tag);
    for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
    return node;
  }

  function setStatus(target, message, kind = "") {
    target.textContent = message;
    target.className = `status ${kind}`.trim();
  }

  const fmt = (x, digits = 3) => (typeof x === "number" ? x.toFixed(digits) : "–");
  const short = (id) => (id.length > 14 ? `${id.slice(0, 10)}…` : id);
  const count = (n, one, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
  const clip = (text, n) => (text.length > n ? `${text.slice(0, n - 1)}…` : text);

  function label(id) {
    const name = state.labels.get(id);
    if (name) return name;
    const passage = state.passages.get(id);
    if (passage && passage.title) return passage.title;
    return id.startsWith("c:") ? `passage ${short(id)}` : short(id);
  }

  function kindOf(id) {
    if (id.startsWith("e:")) return "entity";
    if (id.startsWith("c:")) return "passage";
    return "other";
  }

  // -- RCP over HTTP --------------------------------------------------------------------------

  class RpcError extends Error {
    constructor(err, status) {
      super((err && err.message) || "request failed");
      this.code = err && err.code;
      this.data = err && err.data;
      this.status = status;
    }
  }

  function headers() {
    const h = { "Content-Type": "application/json", Accept: "application/json" };
    if (state.token) h.Authorization = `Bearer ${state.token}`;
    return h;
  }

  async function request(url, init) {
    let resp;
    try {
      resp = await fetch(url, { ...init, headers: headers(), cache: "no-store" });
    } catch (err) {
      throw new RpcError({ code: 0, message: `cannot reach the server (${err.message})` }, 0);
    }
    let body = null;
    try {
      body = await resp.json();
    } catch {
      body = null;
    }
    if (resp.status === 401) {
      const err = (body && body.error) || { code: -32012, message: "missing or wrong bearer token" };
      throw new RpcError(err, 401);
    }
    if (body && body.error) throw new RpcError(body.error, resp.status);
    if (!resp.ok || body == null) {
      throw new RpcError({ code: 0, message: `HTTP ${resp.status} from ${url}` }, resp.status);
    }
    return body;
  }

  async function post(graph, key, method, params) {
    const url = `graphs/${encodeURIComponent(graph)}/s/${key}/rcp/${method}`;
    const id = ++state.rpcSeq;
    const body = JSON.stringify({ jsonrpc: "2.0", id, method, params });
    return (await request(url, { method: "POST", body })).result;
  }

  function session(graph) {
    let s = state.sessions.get(graph);
    if (!s) {
      const bytes = crypto.getRandomValues(new Uint8Array(16));
      const key = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
      s = { key, ready: null };
      state.sessions.set(graph, s);
    }
    return s;
  }

  /** One RCP call on the current graph, in this page's own session (initialized once). */
  async function rcp(method, params, retried = false) {
    const graph = state.graph;
    const s = session(graph);
    if (!s.ready) {
      const init = { protocolVersion: 1, client: { name: "kgrag-explorer", version: "1" } };
      s.ready = post(graph, s.key, "initialize", { ...init, capabilities: {} }).catch((err) => {
        if (err.code === -32600) return null; // already initialized
        s.ready = null;
        throw err;
      });
    }
    await s.ready;
    try {
      return await post(graph, s.key, method, params);
    } catch (err) {
      if (err.code === -32001 && !retried) {
        s.ready = null; // the server forgot an idle session
        return rcp(method, params, true);
      }
      throw err;
    }
  }

  function describe(err) {
    return err.code ? `${err.message} (error ${err.code})` : err.message;
  }

  /** Run ``action``; a 401 asks for a token (and runs it again once one is given). */
  async function guarded(action, target) {
    try {
      return await action();
    } catch (err) {
      if (!(err instanceof RpcError)) {
        console.error(err);
        setStatus(target, `Something went wrong on this page: ${err.message}`, "error");
        return undefined;
      }
      if (err.status === 401) {
        askToken(action, target, err);
        return undefined;
      }
      setStatus(target, describe(err), "error");
      return undefined;
    }
  }

  function askToken(action, target, err) {
    state.pending = { action, target };
    const message = state.token
      ? `The token was refused: ${err.message}. Enter the right one.`
      : "This server needs a bearer token.";
    $("token-message").textContent = message;
    $("token-panel").classList.remove("hidden");
    $("token-panel").classList.toggle("refused", Boolean(state.token));
    setStatus(target, state.token ? `Token refused (${err.message}).` : "Waiting for a token.", "error");
    $("token").focus();
  }

  function useToken(event) {
    event.preventDefault();
    state.token = $("token").value.trim();
    if (state.token) sessionStorage.setItem(TOKEN_KEY, state.token);
    else sessionStorage.removeItem(TOKEN_KEY);
    $("token").value = "";
    $("token-panel").classList.add("hidden");
    $("forget-token").classList.toggle("hidden", !state.token);
    const pending = state.pending;
    state.pending = null;
    if (pending) {
      setStatus(pending.target, "Trying again…", "busy");
      guarded(pending.action, pending.target);
    }
  }

  function forgetToken() {
    state.token = "";
    sessionStorage.removeItem(TOKEN_KEY);
    state.sessions.clear();
    $("forget-token").classList.add("hidden");
  }

  // -- graphs ---------------------------------------------------------------------------------

  async function loadGraphs() {
    const health = await request("health", { method: "GET" });
    // a server that needs a token names no graph to a caller without one
    if (health.auth === "required") {
      const message = state.token ? "missing or wrong bearer token" : "a bearer token is needed";
      throw new RpcError({ code: -32012, message }, 401);
    }
    state.graphs = Array.isArray(health.graphs) ? health.graphs.map(String) : [];
    const picker = $("graph");
    picker.replaceChildren(...state.graphs.map((g) => el("option", { value: g, text: g })));
    const wanted = new URLSearchParams(location.search).get("graph");
    state.graph = state.graphs.includes(wanted) ? wanted : state.graphs[0] || null;
    picker.value = state.graph || "";
    picker.disabled = state.graphs.length < 2;
    if (!state.graph) throw new RpcError({ code: 0, message: "the server serves no graph" }, 0);
  }

  function switchGraph() {
    state.graph = $("graph").value;
    state.version = null;
    state.labels.clear();
    state.passages.clear();
    clearDrawing();
    clearResults();
    resetCommunities();
    updateUrl();
    if (isCommunitiesView()) openCommunities();
    else if ($("q").value.trim()) search();
  }

  function updateUrl() {
    const p = new URLSearchParams();
    const q = $("q").value.trim();
    if (q) p.set("q", q);
    p.set("op", $("op").value);
    if (state.graph && state.graphs.length > 1) p.set("graph", state.graph);
    const k = Number($("k").value);
    if (k && k !== DEFAULT_K) p.set("k", String(k));
    if (isCommunitiesView()) p.set("view", "communities");
    history.replaceState(null, "", `?${p.toString()}`);
  }

  // -- search ---------------------------------------------------------------------------------

  function clearResults() {
    $("hits").replaceChildren();
    $("summary").replaceChildren();
    $("summary").classList.add("hidden");
  }

  async function search(event) {
    if (event) event.preventDefault();
    const status = $("status");
    const query = $("q").value.trim();
    if (!query) {
      setStatus(status, "Type a question first.", "error");
      return;
    }
    const op = $("op").value;
    const k = Math.max(1, Math.min(100, Number($("k").value) || DEFAULT_K));
    showView("search");
    updateUrl();
    const seq = ++state.searchSeq;
    setStatus(status, `Searching (${op})…`, "busy");
    const started = performance.now();
    await guarded(async () => {
      let result;
      if (op === "retrieve") {
        result = await rcp("retrieve", { query, k, includeText: true });
      } else if (op === "local") {
        const unit = ["chunk", "path"];
        result = await rcp("graph", { op, query, k, unit, includeText: true });
      } else {
        result = await rcp("graph", { op, query, k, includeText: true });
      }
      if (seq !== state.searchSeq) return;
      clearResults();
      clearDrawing();
      state.version = result.indexVersion || null;
      const hits = result.hits || [];
      hits.forEach(learn);
      if (op === "global") renderGlobal(result);
      else renderHits(op, result);
      if (op === "local") draw(hits.filter((h) => h.unit === "path"));
      if (op === "drift") draw(hits);
      const ms = Math.round(performance.now() - started);
      const found =
        op === "global"
          ? count((result.communities || []).length, "community", "communities")
          : count(hits.length, "hit");
      setStatus(status, `${found} · ${ms} ms · index ${result.indexVersion || "?"}`, "ok");
    }, status);
  }

  /** Names and passage texts a hit brings, for labels and evidence. */
  function learn(hit) {
    const meta = hit.meta || {};
    for (const [id, name] of Object.entries(meta.labels || {})) {
      if (typeof name === "string" && name && name !== id) state.labels.set(id, name);
    }
    for (const [id, p] of Object.entries(meta.passages || {})) {
      if (p && typeof p.text === "string") state.passages.set(id, { title: p.title || "", text: p.text });
    }
    if (hit.unit === "chunk" && typeof hit.text === "string") {
      state.passages.set(hit.id, { title: hitTitle(hit), text: hit.text });
    }
  }

  function hitTitle(hit) {
    const meta = hit.meta || {};
    if (meta.title) return String(meta.title);
    if (hit.citation && hit.citation.title) return String(hit.citation.title);
    if (hit.unit === "path" && meta.target) return `path to ${label(meta.target)}`;
    return "";
  }

  // -- what a hit came from: file, section path, page; tables and pictures shown --------

  function whereFrom(hit) {
    const meta = hit.meta || {};
    const parts = [];
    if (meta.source) parts.push(el("span", { class: "from-file", text: String(meta.source) }));
    const path = Array.isArray(meta.parent_path) ? meta.parent_path.map(String) : [];
    if (path.length) parts.push(el("span", { class: "from-section", text: path.join(" › ") }));
    if (Array.isArray(meta.pages) && meta.pages.length === 2) {
      parts.push(el("span", { class: "from-page", text: `pp. ${meta.pages[0]}–${meta.pages[1]}` }));
    } else if (meta.page != null) {
      parts.push(el("span", { class: "from-page", text: `p. ${meta.page}` }));
    }
    return parts.length ? el("div", { class: "hit-from" }, ...parts) : null;
  }

  // The table of a table hit, from its cells (plain strings: no markup is read).
  function tableOf(table) {
    const header = Array.isArray(table.header) ? table.header : [];
    const cells = Array.isArray(table.cells) ? table.cells : [];
    if (!cells.length) return null;
    const row = (tag, values) =>
      el("tr", {}, ...values.map((v) => el(tag, { text: String(v ?? "") })));
    return el(
      "div",
      { class: "hit-table-wrap" },
      el("table", { class: "hit-table" }, header.length ? row("th", header) : null,
        ...cells.map((r) => row("td", Array.isArray(r) ? r : []))),
    );
  }

  // The picture of an image hit, fetched with the session's token (an <img src> could
  // not send it) and shown as a data: URL.
  function pictureOf(hit) {
    const meta = hit.meta || {};
    const image = meta.image || {};
    const doc = String(meta.docId || "").replace(/^d:/, "");
    if (!doc || image.index == null) return null;
    const img = el("img", { class: "hit-image", alt: String(image.alt || image.caption || "") });
    const url =
      `/v1/retrieval/images/${encodeURIComponent(doc)}/${Number(image.index) + 1}` +
      `?namespace=${encodeURIComponent(state.graph || "")}`;
    fetch(url, { headers: headers(), cache: "no-store" })
      .then((resp) => (resp.ok ? resp.blob() : null))
      .then((blob) => {
        if (!blob) return;
        const reader = new FileReader(); // a data: URL, which the page's policy allows
        reader.onload = () => (img.src = String(reader.result));
        reader.readAsDataURL(blob);
      })
      .catch(() => {});
    return el("figure", { class: "hit-figure" }, img);
  }

  function badge(text, cls = "") {
    return el("span", { class: `badge ${cls}`.trim(), text });
  }

  function hitCard(hit, number) {
    const trust = hit.trust || {};
    const kind = (hit.meta || {}).chunk_type;
    const text = typeof hit.text === "string" ? hit.text : "";
    const snippet = el("p", { class: hit.unit === "path" ? "snippet path-text" : "snippet" });
    snippet.textContent = hit.unit === "path" ? text : clip(text, SNIPPET);
    const more =
      hit.unit !== "path" && text.length > SNIPPET
        ? el("button", {
            class: "link",
            type: "button",
            text: "more",
            onclick: (e) => {
              const open = e.target.textContent === "more";
              snippet.textContent = open ? text : clip(text, SNIPPET);
              e.target.textContent = open ? "less" : "more";
            },
          })
        : null;
    const actions = [];
    if (hit.unit === "path") {
      actions.push(
        el("button", {
          class: "link",
          type: "button",
          text: "highlight in graph",
          onclick: () => highlight(hit),
        }),
      );
    }
    if (hit.unit === "chunk") {
      actions.push(
        el("button", {
          class: "link",
          type: "button",
          text: "explore in graph",
          onclick: () => explore(hit.id),
        }),
      );
    }
    const card = el(
      "li",
      { class: `hit unit-${hit.unit}`, "data-id": hit.id },
      el(
        "div",
        { class: "hit-head" },
        el("span", { class: "rank", text: `${number}` }),
        badge(hit.unit, `unit u-${hit.unit}`),
        badge(`level ${hit.level ?? 0}`),
        badge(`score ${fmt(hit.score)}`),
        hit.confidence != null ? badge(`confidence ${fmt(hit.confidence, 2)}`, "conf") : null,
        trust.injectionSuspected ? badge("injection suspected", "warn") : null,
        kind && kind !== "text" ? badge(kind, `kind k-${kind}`) : null,
      ),
      el("h3", { class: "hit-title", text: hitTitle(hit) || hit.id }),
      whereFrom(hit),
      kind === "table" && (hit.meta || {}).table ? tableOf(hit.meta.table) : null,
      kind === "image" ? pictureOf(hit) : null,
      snippet,
      el("div", { class: "hit-foot" }, el("code", { text: hit.id }), more, ...actions),
    );
    if (hit.unit === "path")
      card.addEventListener("click", (e) => e.target.tagName !== "BUTTON" && highlight(hit));
    return card;
  }

  function renderHits(op, result) {
    const hits = result.hits || [];
    const list = $("hits");
    if (op === "drift") renderDrift(result);
    if (!hits.length) {
      list.append(el("li", { class: "empty", text: "No hits." }));
      return;
    }
    let unit = null;
    hits.forEach((hit, i) => {
      if (op === "local" && hit.unit !== unit) {
        unit = hit.unit;
        const n = hits.filter((h) => h.unit === unit).length;
        const name = unit === "path" ? "Paths" : unit === "chunk" ? "Passages" : unit;
        list.append(el("li", { class: "group", text: `${name} (${n})` }));
      }
      list.append(hitCard(hit, i + 1));
    });
  }

  function renderDrift(result) {
    const box = $("summary");
    const followups = result.followups || [];
    const primer = result.primer || [];
    put(
      box,
      el("h2", { text: "DRIFT" }),
      el("p", {
        class: "muted",
        text: `Primed by ${count(primer.length, "community", "communities")}, then ${count(followups.length, "follow-up local search", "follow-up local searches")}.`,
      }),
      followups.length
        ? el(
            "ul",
            { class: "followups" },
            followups.map((f) => el("li", { text: f })),
          )
        : null,
      primer.length
        ? el(
            "p",
            { class: "chips" },
            primer.map((c) => badge(`${short(c.id)} · level ${c.level} · ${fmt(c.score)}`)),
          )
        : null,
    );
    box.classList.remove("hidden");
  }

  function renderGlobal(result) {
    const box = $("summary");
    const communities = result.communities || [];
    const confidence = new Map((result.hits || []).map((h) => [h.id, h.confidence]));
    const number = new Map(communities.map((c, i) => [c.id, i + 1]));
    const para = el("p", { class: "summary-text" });
    const parts = String(result.summary || "").split(/\s*\[(m:[^\]\s]+)\]/);
    parts.forEach((part, i) => {
      if (i % 2 === 0) {
        if (part.trim()) para.append(document.createTextNode(`${part.trim()} `));
        return;
      }
      const n = number.get(part);
      para.append(
        el("button", {
          class: "cite",
          type: "button",
          title: part,
          text: n ? `[${n}]` : `[${short(part)}]`,
          onclick: () => flash(document.querySelector(`#hits li[data-id="${CSS.escape(part)}"]`)),
        }),
        " ",
      );
    });
    const level = result.level == null ? "all levels" : `level ${result.level}`;
    put(
      box,
      el("h2", { text: `Summary · ${level}` }),
      result.summary ? para : el("p", { class: "muted", text: "No summary." }),
    );
    box.classList.remove("hidden");
    const list = $("hits");
    list.append(el("li", { class: "group", text: `Cited communities (${communities.length})` }));
    communities.forEach((c, i) => list.append(communityCard(c, i + 1, confidence.get(c.id))));
  }

  function flash(node) {
    if (!node) return;
    node.scrollIntoView({ block: "nearest", behavior: "smooth" });
    node.classList.remove("flash");
    void node.offsetWidth;
    node.classList.add("flash");
  }

  // -- communities ---------------------------------------------------------------------------

  function communityCard(c, number, confidence) {
    let text = String(c.summary || "");
    if (c.title && text.startsWith(`${c.title}\n`)) text = text.slice(c.title.length + 1); // the title is shown above
    const report = el("p", { class: "report clamp", text });
    const details = el("div", { class: "community-details" });
    const leaves = Array.isArray(c.leaves) ? c.leaves : [];
    const leafCount = c.leafCount ?? leaves.length;
    const card = el(
      "li",
      { class: "hit community", "data-id": c.id },
      el(
        "div",
        { class: "hit-head" },
        number != null ? el("span", { class: "rank", text: `${number}` }) : null,
        badge("community", "unit u-community"),
        badge(`level ${c.level}`),
        c.score != null ? badge(`score ${fmt(c.score)}`) : null,
        confidence != null ? badge(`confidence ${fmt(confidence, 2)}`, "conf") : null,
        c.rating != null ? badge(`rating ${fmt(c.rating, 1)}`) : null,
        c.size != null ? badge(count(c.size, "member")) : null,
        badge(count(leafCount, "passage")),
      ),
      el("h3", { class: "hit-title", text: c.title || c.id }),
      report,
      details,
      el(
        "div",
        { class: "hit-foot" },
        el("code", { text: c.id }),
        el("button", {
          class: "link",
          type: "button",
          text: "full report",
          onclick: (e) => {
            const open = report.classList.toggle("clamp");
            e.target.textContent = open ? "full report" : "shorter";
          },
        }),
        el("button", {
          class: "link",
          type: "button",
          text: "members & passages",
          onclick: (e) => {
            e.target.remove();
            guarded(() => communityDetails(c, details), $(isCommunitiesView() ? "comm-status" : "status"));
          },
        }),
      ),
    );
    return card;
  }

  async function communityDetails(c, box) {
    const members = Array.isArray(c.members) ? c.members : [];
    const leaves = Array.isArray(c.leaves) ? c.leaves : [];
    box.replaceChildren(el("p", { class: "muted", text: "Loading members…" }));
    if (members.length) await resolveLabels(members);
    const chip = (id) =>
      el("button", {
        class: `chip ${kindOf(id)}`,
        type: "button",
        title: id,
        text: label(id),
        onclick: () => explore(id),
      });
    const listed = (n, total, what) => (total > n ? `${what} (${n} of ${total})` : `${what} (${n})`);
    put(
      box,
      c.parent ? el("p", { class: "muted small", text: `Part of ${c.parent}` }) : null,
      c.children && c.children.length
        ? el("p", {
            class: "muted small",
            text: count(c.children.length, "sub-community", "sub-communities"),
          })
        : null,
      members.length ? el("h4", { text: listed(members.length, c.size ?? members.length, "Members") }) : null,
      members.length
        ? el("p", { class: "chips" }, members.map(chip))
        : el("p", { class: "muted", text: "The server lists no members." }),
      leaves.length
        ? el("h4", { text: listed(leaves.length, c.leafCount ?? leaves.length, "Leaf passages") })
        : null,
      leaves.length ? el("p", { class: "chips" }, leaves.map(chip)) : null,
      el("p", { class: "muted small", text: "Click one to explore it in the graph." }),
    );
  }

  function resetCommunities() {
    state.communities = { cursor: null, top: null, seq: state.communities.seq + 1 };
    $("communities").replaceChildren();
    $("level").replaceChildren(el("option", { value: "", text: "all levels" }));
    $("more").classList.add("hidden");
  }

  function openCommunities() {
    showView("communities");
    updateUrl();
    if (!$("communities").children.length) loadCommunities();
  }

  async function loadCommunities() {
    const status = $("comm-status");
    const seq = state.communities.seq;
    setStatus(status, "Loading communities…", "busy");
    await guarded(async () => {
      const params = { op: "communities", k: COMMUNITY_PAGE };
      const level = $("level").value;
      if (level !== "") params.level = Number(level);
      if (state.communities.cursor) params.cursor = state.communities.cursor;
      const result = await rcp("graph", params);
      if (seq !== state.communities.seq) return;
      const page = result.communities || [];
      if (state.communities.top == null && level === "" && page.length) {
        state.communities.top = page[0].level; // coarsest first: the top level
        const select = $("level");
        for (let lv = page[0].level; lv >= 0; lv--) {
          select.append(
            el("option", { value: String(lv), text: `level ${lv}${lv === 0 ? " (finest)" : ""}` }),
          );
        }
      }
      const list = $("communities");
      for (const c of page) list.append(communityCard(c, list.children.length + 1));
      state.communities.cursor = result.nextCursor || null;
      $("more").classList.toggle("hidden", !result.nextCursor);
      const where = level === "" ? "all levels" : `level ${level}`;
      setStatus(
        status,
        `${list.children.length} communities shown (${where})${result.nextCursor ? "; more below" : ""}`,
        "ok",
      );
    }, status);
  }

  function changeLevel() {
    const top = state.communities.top;
    state.communities = { cursor: null, top, seq: state.communities.seq + 1 };
    $("communities").replaceChildren();
    loadCommunities();
  }

  // -- views ---------------------------------------------------------------------------------

  function isCommunitiesView() {
    return !$("view-communities").classList.contains("hidden");
  }

  function showView(name) {
    const communities = name === "communities";
    $("view-communities").classList.toggle("hidden", !communities);
    $("view-search").classList.toggle("hidden", communities);
    $("tab-communities").classList.toggle("active", communities);
    $("tab-search").classList.toggle("active", !communities);
  }

  // -- the drawing ---------------------------------------------------------------------------

  function hash(text) {
    let h = 2166136261;
    for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619);
    return (h >>> 0) / 4294967296;
  }

  function addNode(id, near) {
    if (state.nodes.has(id)) return state.nodes.get(id);
    const anchor = near && state.nodes.get(near);
    const angle = hash(id) * 2 * Math.PI;
    const radius = anchor ? 60 + 40 * hash(`${id}r`) : 200 * Math.sqrt(hash(`${id}r`));
    const node = {
      id,
      kind: kindOf(id),
      x: (anchor ? anchor.x : 0) + radius * Math.cos(angle),
      y: (anchor ? anchor.y : 0) + radius * Math.sin(angle),
      pinned: false,
      expanded: false,
    };
    state.nodes.set(id, node);
    return node;
  }

  function edgeKey(e) {
    return [e.src, e.dst, e.kind || "", e.predicate || ""].join("\u0001");
  }

  function addEdge(e, hitId, merge = false) {
    if (!e || !e.src || !e.dst || e.src === e.dst) return;
    addNode(e.src);
    addNode(e.dst);
    let key = edgeKey(e);
    if (merge && !state.edges.has(key)) {
      for (const [k, old] of state.edges) {
        const same = (old.src === e.src && old.dst === e.dst) || (old.src === e.dst && old.dst === e.src);
        if (same && old.kind === e.kind) {
          key = k;
          break;
        }
      }
    }
    const old = state.edges.get(key);
    if (old) {
      for (const [k, v] of Object.entries(e)) if (old[k] == null) old[k] = v;
      if (hitId) old.hits.add(hitId);
      return;
    }
    state.edges.set(key, { ...e, key, hits: new Set(hitId ? [hitId] : []) });
  }

  function draw(hits) {
    for (const hit of hits) {
      const prov = hit.provenance || {};
      if (!Array.isArray(prov.edges) || !prov.edges.length) continue;
      for (const id of prov.nodes || prov.path || []) addNode(id);
      for (const e of prov.edges) addEdge(e, hit.id);
      const path = prov.path || [];
      for (let i = 1; i < path.length; i++) {
        const [a, b] = [path[i - 1], path[i]];
        const joined = prov.edges.some((e) => (e.src === a && e.dst === b) || (e.src === b && e.dst === a));
        if (!joined && b.startsWith("c:")) addEdge({ src: a, dst: b, kind: "evidence", evidence: b }, hit.id);
      }
    }
    layout(400, 90);
    render();
    fit();
    const unnamed = [...state.nodes.keys()].filter((id) => id.startsWith("e:") && !state.labels.has(id));
    if (unnamed.length) {
      guarded(async () => {
        await resolveLabels(unnamed);
        render();
      }, $("status"));
    }
  }

  /** Names of entity ids: the ``neighbors`` op lists its seeds first, with their labels. */
  async function resolveLabels(ids) {
    const wanted = [...new Set(ids)].filter((id) => id.startsWith("e:") && !state.labels.has(id));
    for (let at = 0; at < wanted.length; at += 50) {
      const seedIds = wanted.slice(at, at + 50);
      const result = await neighbours({ op: "neighbors", seedIds, hops: 1, k: seedIds.length });
      for (const n of result.nodes || []) {
        if (n.label && n.label !== n.id) state.labels.set(n.id, String(n.label));
      }
    }
  }

  function clearDrawing() {
    state.nodes.clear();
    state.edges.clear();
    state.lit = null;
    state.selected = null;
    render();
    $("detail").replaceChildren(el("p", { class: "muted", text: "Evidence and node details appear here." }));
  }

  /** Fruchterman-Reingold with cooling; pinned (dragged) nodes stay put. */
  function layout(iterations, heat) {
    const nodes = [...state.nodes.values()];
    const n = nodes.length;
    if (!n) return;
    const index = new Map(nodes.map((v, i) => [v.id, i]));
    const pairs = new Map(); // one spring per pair, however many edges join it
    for (const e of state.edges.values()) {
      const a = index.get(e.src);
      const b = index.get(e.dst);
      if (a == null || b == null || a === b) continue;
      const key = a < b ? `${a} ${b}` : `${b} ${a}`;
      pairs.set(key, [
        Math.min(a, b),
        Math.max(a, b),
        Math.max(pairs.get(key)?.[2] || 0, e.kind === "relation" ? 1 : 0.6),
      ]);
    }
    const degree = new Float64Array(n);
    for (const [a, b] of pairs.values()) {
      degree[a]++;
      degree[b]++;
    }
    const mass = Float64Array.from(degree, (d) => Math.sqrt(d + 1));
    // a hub's springs are shared out, so its neighbours spread round it instead of piling up
    const links = [...pairs.values()].map(([a, b, w]) => [
      a,
      b,
      w / Math.sqrt(Math.min(degree[a], degree[b])),
    ]);
    const k = 110;
    const x = Float64Array.from(nodes, (v) => v.x);
    const y = Float64Array.from(nodes, (v) => v.y);
    const dx = new Float64Array(n);
    const dy = new Float64Array(n);
    let t = heat;
    for (let it = 0; it < iterations; it++) {
      dx.fill(0);
      dy.fill(0);
      for (let i = 0; i < n; i++) {
        for (let j = i + 1; j < n; j++) {
          let ex = x[i] - x[j];
          let ey = y[i] - y[j];
          let d2 = ex * ex + ey * ey;
          if (d2 < 0.01) {
            ex = 0.1 * (hash(nodes[i].id) - 0.5);
            ey = 0.1;
            d2 = ex * ex + ey * ey;
          }
          if (d2 > 16 * k * k) continue; // far apart: no push (keeps loose parts near)
          const f = (k * k * mass[i] * mass[j]) / d2; // hubs push harder (as ForceAtlas2)
          dx[i] += ex * f;
          dy[i] += ey * f;
          dx[j] -= ex * f;
          dy[j] -= ey * f;
        }
      }
      for (const [a, b, w] of links) {
        const ex = x[a] - x[b];
        const ey = y[a] - y[b];
        const d = Math.sqrt(ex * ex + ey * ey) || 0.01;
        const f = (w * d) / k;
        dx[a] -= ex * f;
        dy[a] -= ey * f;
        dx[b] += ex * f;
        dy[b] += ey * f;
      }
      for (let i = 0; i < n; i++) {
        if (nodes[i].pinned) continue;
        dx[i] -= x[i] * 0.06;
        dy[i] -= y[i] * 0.11;
        const d = Math.sqrt(dx[i] * dx[i] + dy[i] * dy[i]) || 1;
        const step = Math.min(d, t);
        x[i] += (dx[i] / d) * step;
        y[i] += (dy[i] / d) * step;
      }
      t = Math.max(1, t * 0.985);
    }
    nodes.forEach((v, i) => {
      v.x = x[i];
      v.y = y[i];
    });
  }

  const canvas = () => $("canvas");
  let layers = null;

  function ensureLayers() {
    if (layers) return layers;
    const svg = canvas();
    const defs = sv("defs");
    const marker = sv("marker", {
      id: "arrow",
      viewBox: "0 0 10 10",
      refX: 9,
      refY: 5,
      markerWidth: 7,
      markerHeight: 7,
      orient: "auto-start-reverse",
    });
    marker.append(sv("path", { d: "M0,0 L10,5 L0,10 z", class: "arrow" }));
    defs.append(marker);
    const root = sv("g", { class: "viewport" });
    const edges = sv("g", { class: "edges" });
    const nodes = sv("g", { class: "nodes" });
    const empty = sv("text", { class: "empty-note", x: 0, y: 0, "text-anchor": "middle" });
    empty.textContent = "Run a local or drift search, or explore a passage.";
    root.append(edges, nodes);
    svg.append(defs, root, empty);
    layers = { svg, edges, nodes, empty };
    return layers;
  }

  function render() {
    const { svg, edges, nodes, empty } = ensureLayers();
    empty.classList.toggle("hidden", state.nodes.size > 0);
    if (!state.nodes.size) svg.setAttribute("viewBox", "-300 -150 600 300");
    edges.replaceChildren();
    nodes.replaceChildren();
    for (const e of state.edges.values()) edges.append(edgeElement(e));
    for (const v of state.nodes.values()) nodes.append(nodeElement(v));
    geometry();
    svg.classList.toggle("dim", Boolean(state.lit));
    svg.classList.toggle("busy", state.edges.size > 60); // muted labels only on hover then
  }

  const COOCCURS = "co-occurs with"; // the predicate of co-occurrence stored as a relation

  /** The predicates of a relation edge, stated ones first. */
  function predicates(e) {
    const all = [
      ...new Set([e.predicate, ...(Array.isArray(e.predicates) ? e.predicates : [])].filter(Boolean)),
    ];
    return [...all.filter((p) => p !== COOCCURS), ...all.filter((p) => p === COOCCURS)];
  }

  /** Drawn as a relation: a relation edge with a stated predicate. */
  function stated(e) {
    return e.kind === "relation" && predicates(e)[0] !== COOCCURS;
  }

  function edgeText(e) {
    if (e.kind === "relation") {
      const all = predicates(e);
      if (!all.length) return "relation";
      return all.length > 1 ? `${all[0]} +${all.length - 1}` : all[0];
    }
    if (e.kind === "evidence") return "stated in";
    return e.kind === "cooccurrence" ? "co-occurrence" : e.kind || "edge";
  }

  function edgeElement(e) {
    const relation = stated(e);
    const lit = state.lit && state.lit.has(e.key);
    const g = sv("g", {
      class: `edge ${relation ? "relation" : "other"} k-${e.kind || "edge"}${lit ? " lit" : ""}`,
    });
    const line = sv("path", { class: "edge-line" });
    if (relation) line.setAttribute("marker-end", "url(#arrow)");
    const hit = sv("path", { class: "edge-hit" });
    const text = sv("text", { class: "edge-label", "text-anchor": "middle" });
    text.textContent = clip(edgeText(e), 28);
    const tip = sv("title");
    tip.textContent = `${label(e.src)} — ${edgeText(e)} → ${label(e.dst)}`;
    g.append(line, hit, text, tip);
    g.addEventListener("click", (ev) => {
      ev.stopPropagation();
      showEdge(e);
    });
    if (state.selected === e.key) g.classList.add("selected");
    e.el = { g, line, hit, text };
    return g;
  }

  function nodeElement(v) {
    const lit = state.lit && state.lit.has(v.id);
    const g = sv("g", { class: `node ${v.kind}${lit ? " lit" : ""}${v.expanded ? " expanded" : ""}` });
    const shape =
      v.kind === "passage"
        ? sv("rect", { x: -9, y: -9, width: 18, height: 18, rx: 4 })
        : sv("circle", { r: v.kind === "entity" ? 10 : 7 });
    shape.setAttribute("class", "shape");
    const text = sv("text", { class: "node-label", y: 24, "text-anchor": "middle" });
    text.textContent = clip(label(v.id), 26);
    const tip = sv("title");
    tip.textContent = `${label(v.id)}\n${v.id}`;
    g.append(shape, text, tip);
    if (state.selected === v.id) g.classList.add("selected");
    dragNode(g, v);
    v.el = g;
    return g;
  }

  function geometry() {
    const groups = new Map();
    for (const e of state.edges.values()) {
      const pair = [e.src, e.dst].sort().join("\u0001");
      if (!groups.has(pair)) groups.set(pair, []);
      groups.get(pair).push(e);
    }
    for (const list of groups.values()) {
      list.forEach((e, i) => {
        const a = state.nodes.get(e.src);
        const b = state.nodes.get(e.dst);
        if (!a || !b || !e.el) return;
        const ex = b.x - a.x;
        const ey = b.y - a.y;
        const d = Math.sqrt(ex * ex + ey * ey) || 1;
        const flip = e.src < e.dst ? 1 : -1; // one normal for the whole pair
        const offset = (i - (list.length - 1) / 2) * 34 * flip;
        const cx = (a.x + b.x) / 2 + (-ey / d) * offset;
        const cy = (a.y + b.y) / 2 + (ex / d) * offset;
        const tx = b.x - cx;
        const ty = b.y - cy;
        const td = Math.sqrt(tx * tx + ty * ty) || 1;
        const end = stated(e) ? 13 * state.u : 0; // the arrow stops at the rim
        const bx = b.x - (tx / td) * end;
        const by = b.y - (ty / td) * end;
        const path = `M${a.x.toFixed(1)},${a.y.toFixed(1)} Q${cx.toFixed(1)},${cy.toFixed(1)} ${bx.toFixed(1)},${by.toFixed(1)}`;
        e.el.line.setAttribute("d", path);
        e.el.hit.setAttribute("d", path);
        e.el.text.setAttribute("x", (0.25 * a.x + 0.5 * cx + 0.25 * b.x).toFixed(1));
        e.el.text.setAttribute("y", (0.25 * a.y + 0.5 * cy + 0.25 * b.y - 4).toFixed(1));
      });
    }
    for (const v of state.nodes.values()) {
      const at = `translate(${v.x.toFixed(1)},${v.y.toFixed(1)}) scale(${state.u.toFixed(3)})`;
      if (v.el) v.el.setAttribute("transform", at);
    }
  }

  function fit() {
    const { svg } = ensureLayers();
    const nodes = [...state.nodes.values()];
    if (!nodes.length) return;
    const xs = nodes.map((v) => v.x);
    const ys = nodes.map((v) => v.y);
    const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
    const w = Math.max(x1 - x0 + 160, 360);
    const h = Math.max(y1 - y0 + 120, 240);
    const cx = (x0 + x1) / 2;
    const cy = (y0 + y1) / 2 + 6; // labels hang below their nodes
    svg.setAttribute(
      "viewBox",
      `${(cx - w / 2).toFixed(1)} ${(cy - h / 2).toFixed(1)} ${w.toFixed(1)} ${h.toFixed(1)}`,
    );
    rescale();
  }

  /** Keep nodes, labels and strokes one size on screen whatever the zoom. */
  function rescale() {
    const svg = canvas();
    const [, , w, h] = (svg.getAttribute("viewBox") || "0 0 600 300").split(" ").map(Number);
    const u = Math.max(w / (svg.clientWidth || w), h / (svg.clientHeight || h));
    state.u = Math.min(6, Math.max(0.25, u || 1));
    svg.style.setProperty("--u", state.u.toFixed(3));
    geometry();
  }

  function toSvg(event) {
    const svg = canvas();
    const point = svg.createSVGPoint();
    point.x = event.clientX;
    point.y = event.clientY;
    const matrix = svg.getScreenCTM();
    return matrix ? point.matrixTransform(matrix.inverse()) : point;
  }

  function dragNode(g, v) {
    g.addEventListener("pointerdown", (down) => {
      down.stopPropagation();
      g.setPointerCapture(down.pointerId);
      const start = toSvg(down);
      const origin = { x: v.x, y: v.y };
      let moved = false;
      const move = (ev) => {
        const p = toSvg(ev);
        if (!moved && Math.hypot(ev.clientX - down.clientX, ev.clientY - down.clientY) < 4) return;
        moved = true;
        v.x = origin.x + p.x - start.x;
        v.y = origin.y + p.y - start.y;
        v.pinned = true;
        geometry();
      };
      const up = () => {
        g.removeEventListener("pointermove", move);
        g.removeEventListener("pointerup", up);
        if (!moved) selectNode(v);
      };
      g.addEventListener("pointermove", move);
      g.addEventListener("pointerup", up);
    });
  }

  function panAndZoom() {
    const svg = canvas();
    const box = () => svg.getAttribute("viewBox").split(" ").map(Number);
    svg.addEventListener("pointerdown", (down) => {
      if (!state.nodes.size || down.target.closest(".edge, .node")) return;
      svg.setPointerCapture(down.pointerId);
      const [x, y, w, h] = box();
      const scale = state.u;
      const move = (ev) => {
        const nx = x - (ev.clientX - down.clientX) * scale;
        const ny = y - (ev.clientY - down.clientY) * scale;
        svg.setAttribute("viewBox", `${nx} ${ny} ${w} ${h}`);
      };
      const up = () => {
        svg.removeEventListener("pointermove", move);
        svg.removeEventListener("pointerup", up);
      };
      svg.addEventListener("pointermove", move);
      svg.addEventListener("pointerup", up);
    });
    svg.addEventListener(
      "wheel",
      (ev) => {
        if (!state.nodes.size) return;
        ev.preventDefault();
        const [x, y, w, h] = box();
        const p = toSvg(ev);
        const f = ev.deltaY > 0 ? 1.15 : 1 / 1.15;
        svg.setAttribute("viewBox", `${p.x - (p.x - x) * f} ${p.y - (p.y - y) * f} ${w * f} ${h * f}`);
        rescale();
      },
      { passive: false },
    );
  }

  function highlight(hit) {
    const keys = new Set();
    for (const e of state.edges.values()) if (e.hits.has(hit.id)) keys.add(e.key);
    if (!keys.size) return;
    const same = state.lit && [...keys].every((k) => state.lit.has(k));
    if (same) {
      state.lit = null;
    } else {
      state.lit = keys;
      for (const e of state.edges.values()) {
        if (keys.has(e.key)) {
          state.lit.add(e.src);
          state.lit.add(e.dst);
        }
      }
    }
    document
      .querySelectorAll("#hits li.hit")
      .forEach((li) => li.classList.toggle("active", !same && li.dataset.id === hit.id));
    render();
  }

  // -- details -------------------------------------------------------------------------------

  /** ``text`` as nodes, each case-insensitive occurrence of ``names`` in a <mark>, the
   * sentence ``quote`` (when found) in a span. */
  function highlighted(text, names, quote) {
    const lower = text.toLowerCase();
    const marks = new Uint8Array(text.length);
    for (const name of names) {
      const needle = (name || "").trim().toLowerCase();
      if (needle.length < 2) continue;
      for (let at = lower.indexOf(needle); at >= 0; at = lower.indexOf(needle, at + needle.length)) {
        marks.fill(1, at, at + needle.length);
      }
    }
    const said = new Uint8Array(text.length);
    if (quote) {
      const at = lower.indexOf(quote.trim().toLowerCase());
      if (at >= 0) said.fill(1, at, at + quote.trim().length);
    }
    const out = document.createDocumentFragment();
    let i = 0;
    while (i < text.length) {
      let j = i + 1;
      while (j < text.length && marks[j] === marks[i] && said[j] === said[i]) j++;
      const piece = text.slice(i, j);
      let node = document.createTextNode(piece);
      if (marks[i]) {
        const mark = el("mark");
        mark.append(node);
        node = mark;
      }
      if (said[i]) {
        const span = el("span", { class: "said" });
        span.append(node);
        node = span;
      }
      out.append(node);
      i = j;
    }
    return out;
  }

  function select(key) {
    state.selected = key;
    document.querySelectorAll("#canvas .selected").forEach((n) => n.classList.remove("selected"));
    const item = state.nodes.get(key) || [...state.edges.values()].find((e) => e.key === key);
    const g = item && (item.el && item.el.g ? item.el.g : item.el);
    if (g) g.classList.add("selected");
  }

  function showEdge(e) {
    select(e.key);
    const names = [e.src, e.dst].filter((id) => id.startsWith("e:")).map((id) => label(id));
    const evidence =
      e.evidence || (e.kind === "mention" ? [e.src, e.dst].find((id) => id.startsWith("c:")) : null);
    const passage = evidence ? state.passages.get(evidence) : null;
    const facts = [badge(e.kind || "edge", e.kind === "relation" ? "unit u-path" : "")];
    if (e.weight != null) facts.push(badge(`weight ${fmt(e.weight, 2)}`));
    if (Array.isArray(e.predicates) && e.predicates.length > 1)
      facts.push(badge(`predicates: ${e.predicates.join(", ")}`));
    const body = [];
    if (passage && passage.text) {
      body.push(
        el("h3", { class: "passage-title", text: passage.title || label(evidence) }),
        el("p", { class: "passage-text" }, highlighted(passage.text, names, e.quote)),
      );
    } else if (e.quote) {
      body.push(
        el("h3", { class: "passage-title", text: evidence ? label(evidence) : "Evidence" }),
        el("blockquote", { class: "passage-text" }, highlighted(e.quote, names, null)),
        el("p", {
          class: "muted small",
          text: "The sentence that states this edge; the whole passage is not loaded.",
        }),
      );
    } else if (evidence) {
      body.push(el("p", { class: "muted", text: `Evidence passage ${evidence} (its text is not loaded).` }));
    } else {
      body.push(
        el("p", {
          class: "muted",
          text: "This edge carries no evidence passage (a neighbourhood edge merges every relation between its ends).",
        }),
      );
    }
    put(
      $("detail"),
      el("h2", { text: "Edge" }),
      el(
        "p",
        { class: "says" },
        el("strong", { text: label(e.src) }),
        ` — ${edgeText(e)} → `,
        el("strong", { text: label(e.dst) }),
      ),
      el("p", { class: "chips" }, facts),
      ...body,
      el("p", { class: "ids" }, el("code", { text: evidence || e.relation || "" })),
    );
    $("detail").scrollIntoView({ block: "nearest" });
  }

  async function selectNode(v) {
    select(v.id);
    const passage = state.passages.get(v.id);
    const box = $("detail");
    const status = el("p", {
      class: "muted",
      text: v.expanded ? "Neighbours already drawn." : "Expanding neighbours…",
    });
    put(
      box,
      el("h2", { text: v.kind === "passage" ? "Passage" : v.kind === "entity" ? "Entity" : "Node" }),
      el("h3", { class: "passage-title", text: label(v.id) }),
      passage && passage.text ? el("p", { class: "passage-text", text: passage.text }) : null,
      el("p", { class: "ids" }, el("code", { text: v.id })),
      status,
    );
    if (v.expanded) return;
    await guarded(async () => {
      const added = await expand(v.id);
      status.textContent = added ? `${added} neighbours added.` : "No new neighbours.";
    }, status);
  }

  /** The ``neighbors`` op on ids of the drawing, asked of the version that drew it (a
   * write since may have removed them from the latest); the latest once that is gone. */
  async function neighbours(params) {
    if (!state.version) return rcp("graph", params);
    try {
      return await rcp("graph", { ...params, indexVersion: state.version });
    } catch (err) {
      if (err.code !== -32010) throw err;
      state.version = null; // that version was pruned
      return rcp("graph", params);
    }
  }

  /** Draw the neighbours of ``id`` (RCP graph op ``neighbors``, one hop). */
  async function expand(id) {
    const result = await neighbours({ op: "neighbors", seedIds: [id], hops: 1, k: NEIGHBOURS });
    const before = state.nodes.size;
    addNode(id);
    for (const n of result.nodes || []) {
      if (n.label && n.label !== n.id && !state.labels.has(n.id)) state.labels.set(n.id, String(n.label));
      addNode(n.id, id);
    }
    for (const e of result.edges || []) addEdge(e, null, true);
    state.nodes.get(id).expanded = true;
    layout(300, 70);
    render();
    fit();
    return state.nodes.size - before;
  }

  /** Show ``id`` with its neighbours in the drawing, from anywhere on the page. */
  function explore(id) {
    showView("search");
    updateUrl();
    const node = addNode(id);
    render();
    selectNode(node);
  }

  // -- start -----------------------------------------------------------------------------------

  function start() {
    const params = new URLSearchParams(location.search);
    $("q").value = params.get("q") || "";
    $("op").value = OPS.includes(params.get("op")) ? params.get("op") : "local";
    const k = Number(params.get("k"));
    if (k >= 1) $("k").value = String(Math.min(100, Math.floor(k)));
    $("forget-token").classList.toggle("hidden", !state.token);
    $("search-form").addEventListener("submit", search);
    $("token-form").addEventListener("submit", useToken);
    $("forget-token").addEventListener("click", forgetToken);
    $("graph").addEventListener("change", switchGraph);
    $("tab-search").addEventListener("click", () => {
      showView("search");
      updateUrl();
    });
    $("tab-communities").addEventListener("click", () =>
      guarded(async () => openCommunities(), $("comm-status")),
    );
    $("level").addEventListener("change", changeLevel);
    $("more").addEventListener("click", loadCommunities);
    $("fit").addEventListener("click", fit);
    $("clear").addEventListener("click", clearDrawing);
    panAndZoom();
    window.addEventListener("resize", rescale);
    resetCommunities();
    render();
    const status = $("status");
    guarded(async () => {
      await loadGraphs();
      if (params.get("view") === "communities") openCommunities();
      else if ($("q").value.trim()) await search();
      else
        setStatus(
          status,
          `Ready: ${state.graphs.length} graph${state.graphs.length === 1 ? "" : "s"} served.`,
          "ok",
        );
    }, status);
  }

  document.addEventListener("DOMContentLoaded", start);
})();
