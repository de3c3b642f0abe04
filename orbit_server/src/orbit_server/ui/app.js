// The ORBIT web UI: one script, no build step, no dependencies. Every value
// comes from the public HTTP API (/v1/*) with the signed-in token; values are
// inserted as text nodes only, never as markup (see docs/ui.md).
"use strict";

const TOKEN_KEY = "orbit.token";
const STATUSES = ["RUNNING", "COMPENSATING", "COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"];
const FINISHED = new Set(["COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT", "CONTINUED_AS_NEW"]);
const PAGE = 25;

// ---- DOM helpers ---------------------------------------------------------
function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, kids);
  return el;
}
function svg(tag, attrs, ...kids) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  setAttrs(el, attrs);
  append(el, kids);
  return el;
}
function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = String(v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
}
function append(el, kids) {
  for (const kid of kids.flat(Infinity)) {
    if (kid === undefined || kid === null || kid === false) continue;
    el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
}
const json = (v) => h("pre", {}, JSON.stringify(v, null, 2));
const st = (s) => h("span", { class: `st st-${s}` }, s);
function table(headers, rows, caption) {
  return h("div", { class: "scroll" }, h("table", {},
    caption ? h("caption", { class: "note" }, caption) : null,
    h("thead", {}, h("tr", {}, headers.map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c) => h("td", {}, c)))))));
}
function kv(pairs) {
  return h("dl", { class: "kv" }, pairs.filter((p) => p && p[1] !== undefined && p[1] !== null)
    .map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}
function panel(title, ...body) {
  const id = "p-" + title.toLowerCase().replace(/[^a-z0-9]+/g, "-");
  return h("section", { class: "panel", "aria-labelledby": id }, h("h2", { id }, title), body);
}
const link = (href, text) => h("a", { href }, text);
const execLink = (id) => link(`#/executions/${encodeURIComponent(id)}`, id);
const fmtTime = (ms) => (ms == null ? "" : new Date(ms).toLocaleString());
// `30d`, `1h`, `500ms`: the largest unit that divides it, as `orbit graph` writes durations.
function fmtMs(ms) {
  for (const [unit, size] of [["d", 86400000], ["h", 3600000], ["m", 60000], ["s", 1000]]) if (ms && ms % size === 0) return `${ms / size}${unit}`;
  return `${ms}ms`;
}
function fmtDur(ms) {
  if (ms == null) return "";
  if (ms < 1000) return `${ms} ms`;
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  const hr = Math.floor(m / 60);
  return hr < 48 ? `${hr} h ${m % 60} min` : `${Math.floor(hr / 24)} d ${hr % 24} h`;
}

// ---- API ------------------------------------------------------------------
class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}
async function api(method, path, body) {
  const headers = { accept: "application/json" };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  const reply = await fetch(path, {
    method, headers, credentials: "omit", cache: "no-store",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await reply.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  if (!reply.ok) {
    const err = (data && data.error) || {};
    if (reply.status === 401 && session.signedIn) { signOut("The server refused the token."); }
    throw new ApiError(reply.status, err.code || String(reply.status), err.message || String(text));
  }
  return data;
}
const get = (path) => api("GET", path);
function problem(err) {
  if (err instanceof ApiError && err.status === 403) {
    return h("p", { class: "err", role: "alert" }, "Not permitted: ", err.message);
  }
  if (err instanceof ApiError) return h("p", { class: "err", role: "alert" }, `${err.code}: ${err.message}`);
  return h("p", { class: "err", role: "alert" }, String(err && err.message ? err.message : err));
}

// ---- session and sign-in ----------------------------------------------------
const session = { signedIn: false, kind: "", admin: false };

async function signIn(token) {
  if (token !== null) sessionStorage.setItem(TOKEN_KEY, token);
  // The book's check: the token must be able to list executions.
  await get("/v1/executions?limit=1");
  session.signedIn = true;
  if (!sessionStorage.getItem(TOKEN_KEY)) {
    session.kind = "No authentication configured";
    session.admin = true;
  } else {
    try {
      await get("/v1/workers");
      session.kind = "Admin token";
      session.admin = true;
    } catch (err) {
      const who = /client `([^`]+)`/.exec(err.message || "");
      session.kind = who ? `Client ${who[1]} (restricted)` : "Client (restricted)";
      session.admin = false;
    }
  }
  document.getElementById("who").textContent = session.kind;
  document.getElementById("nav").hidden = false;
  document.getElementById("signout").hidden = !sessionStorage.getItem(TOKEN_KEY);
}

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  session.signedIn = false;
  document.getElementById("who").textContent = "";
  document.getElementById("nav").hidden = true;
  document.getElementById("signout").hidden = true;
  showSignIn(message);
}

function showSignIn(message) {
  stopTimers();
  const main = document.getElementById("main");
  const input = h("input", { type: "password", id: "token", name: "token", autocomplete: "off", required: true });
  const status = h("p", { role: "status", "aria-live": "polite" }, message ? h("span", { class: "err" }, message) : "");
  const form = h("form", { class: "sform", "aria-labelledby": "signin-h" },
    h("label", { for: "token" }, "Token (the admin token or a client identity's token)"), input,
    h("button", { type: "submit" }, "Sign in"), status);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      await signIn(input.value.trim());
      route();
    } catch (err) {
      sessionStorage.removeItem(TOKEN_KEY);
      status.replaceChildren(err instanceof ApiError && err.status === 401
        ? h("span", { class: "err" }, "Token rejected")
        : problem(err));
    }
  });
  main.replaceChildren(h("h1", { id: "signin-h" }, "Sign in"), form);
  input.focus();
}

// ---- router and polling -------------------------------------------------------
let timers = [];
let generation = 0;
function stopTimers() {
  for (const t of timers) clearInterval(t);
  timers = [];
  generation += 1;
}
function every(ms, fn) { timers.push(setInterval(fn, ms)); }

function parseHash() {
  const raw = location.hash.replace(/^#/, "") || "/";
  const [path, query] = raw.split("?");
  return { parts: path.split("/").filter(Boolean).map(decodeURIComponent), params: new URLSearchParams(query || "") };
}

const VIEWS = {
  "": overview,
  executions: (p, q) => (p.length > 1 ? executionDetail(p[1], q) : executionList(q)),
  workflows: (p) => (p.length > 1 ? workflowPage(p[1], p[2]) : workflowList()),
  schedules: (p) => (p.length > 1 ? schedulePage(p[1]) : scheduleList()),
  workers: () => workersView(),
};

async function route() {
  if (!session.signedIn) return;
  stopTimers();
  const { parts, params } = parseHash();
  const view = VIEWS[parts[0] || ""] || notFound;
  for (const a of document.querySelectorAll("#nav a")) {
    const target = a.getAttribute("href").slice(2);
    if (target === (parts[0] || "")) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  const main = document.getElementById("main");
  const mine = generation;
  try {
    const content = await view(parts, params, () => mine === generation);
    if (mine === generation && content) main.replaceChildren(...[content].flat());
  } catch (err) {
    if (mine === generation) main.replaceChildren(h("h1", {}, "Error"), problem(err));
  }
}
function notFound() { return [h("h1", {}, "Not found"), h("p", {}, "No such view.")]; }

// A view's body that redraws itself every `ms` while it is shown.
function live(ms, draw) {
  const box = h("div", { "aria-live": "off" });
  const mine = generation;
  let busy = false;
  const run = async () => {
    if (busy || mine !== generation) return;
    busy = true;
    try {
      const content = await draw();
      if (mine === generation && content !== undefined) box.replaceChildren(...[content].flat());
    } catch (err) {
      if (mine === generation) box.replaceChildren(problem(err));
    } finally { busy = false; }
  };
  run();
  if (ms) every(ms, run);
  box.refresh = run;
  return box;
}

// ---- overview -----------------------------------------------------------------
async function overview() {
  return [h("h1", {}, "Overview"), h("div", { class: "grid" },
    live(5000, serverPanel), live(5000, workersPanel), live(5000, schedulesPanel)),
  live(5000, executionsPanels)];
}

async function serverPanel() {
  const health = await get("/v1/health");
  const leader = health.leader ? `${health.leader.node_id} (${health.leader.addr})` : null;
  const rows = [["Status", st(health.status)], ["Runtime version", health.runtime_version],
    ["API version", health.api_version], ["Role", health.role || "single"],
    ["Node id", health.node_id], ["Term", health.term], ["Leader", leader],
    ["Active executions", health.active_executions], ["Worker sessions", health.worker_sessions],
    ["Executions owned", health.owned_executions], ["Tasks claimed", health.tasks_claimed]];
  // Shared mode: every node of the cluster, as this server last saw it.
  const nodes = Array.isArray(health.nodes) ? table(["Node", "Address", "Liveness", "Last heartbeat", "Executions owned"],
    health.nodes.map((n) => [n.node_id, n.addr, n.live ? "live" : "not live", `${fmtDur(n.heartbeat_age_ms)} ago`, n.owned_executions]),
    "Nodes of the cluster") : null;
  return panel("Server", kv(rows), nodes);
}

async function workersPanel() {
  let list;
  try { list = (await get("/v1/workers")).workers; } catch (err) {
    if (err instanceof ApiError && err.status === 403) return panel("Workers", h("p", {}, "Not permitted"));
    throw err;
  }
  const online = list.filter((w) => w.online);
  const tasks = [...new Set(online.flatMap((w) => w.contracts.map((c) => c.task_name)))].sort();
  return panel("Workers", kv([["Online", online.length], ["Offline", list.length - online.length],
    ["Tasks in flight", list.reduce((n, w) => n + w.inflight, 0)], ["Tasks served", tasks.join(", ") || "none"]]),
  link("#/workers", "All workers"));
}

async function schedulesPanel() {
  const list = (await get("/v1/schedules")).schedules;
  const active = list.filter((s) => !s.paused && s.next_fire_at).length;
  const paused = list.filter((s) => s.paused).length;
  const failed = list.filter((s) => s.last_error).length;
  const next = list.map((s) => s.next_fire_at).filter(Boolean).sort()[0];
  return panel("Schedules", kv([["Active", link("#/schedules", String(active))],
    ["Paused", link("#/schedules", String(paused))], ["Latest start failed", link("#/schedules", String(failed))],
    ["Next fire", next ? fmtTime(Date.parse(next)) : "none"]]));
}

async function executionsPanels() {
  const lists = await Promise.all(STATUSES.map((s) => get(`/v1/executions?status=${s}&limit=1000`)));
  const counts = STATUSES.map((s, i) => [s, link(`#/executions?status=${s}`,
    lists[i].executions.length >= 1000 ? "1000+" : String(lists[i].executions.length))]);
  const failures = [...lists[STATUSES.indexOf("FAILED")].executions, ...lists[STATUSES.indexOf("TIMED_OUT")].executions]
    .sort((a, b) => b.updated_at_ms - a.updated_at_ms).slice(0, 8);
  const docs = await Promise.all(failures.map((e) => get(`/v1/executions/${encodeURIComponent(e.execution_id)}`).catch(() => null)));
  return h("div", { class: "grid" }, panel("Executions by status", kv(counts)),
    panel("Recent failures", failures.length ? table(["Execution", "Workflow", "Status", "Error"],
      failures.map((e, i) => [execLink(e.execution_id), e.workflow, st(e.status),
        docs[i] && docs[i].error ? `${docs[i].error.code}: ${docs[i].error.message}` : ""])) : h("p", {}, "None")));
}

// ---- execution list ---------------------------------------------------------------
async function executionList(q) {
  const opened = performance.now();
  let first = true;
  const status = q.get("status") || "";
  const workflow = q.get("workflow") || "";
  const search = q.get("q") || "";
  const where = q.get("where") || "";
  const page = Math.max(0, parseInt(q.get("page") || "0", 10) || 0);
  const setQuery = (changes) => {
    const next = new URLSearchParams({ status, workflow, q: search, where, page: String(page), ...changes });
    for (const [k, v] of [...next]) if (!v || (k === "page" && v === "0")) next.delete(k);
    const text = next.toString();
    location.hash = `#/executions${text ? "?" + text : ""}`;
  };
  const statusSel = h("select", { id: "f-status", onchange: (ev) => setQuery({ status: ev.target.value, page: "0" }) },
    h("option", { value: "" }, "any"), STATUSES.map((s) => h("option", { value: s, selected: s === status }, s)));
  const wfSel = h("select", { id: "f-workflow", onchange: (ev) => setQuery({ workflow: ev.target.value, page: "0" }) },
    h("option", { value: "" }, "any"), workflow ? h("option", { value: workflow, selected: true }, workflow) : null);
  // The workflow names arrive beside the list, not before it.
  get("/v1/workflows").then(({ workflows }) => {
    for (const n of [...new Set(workflows.map((w) => w.name))].sort()) if (n !== workflow) wfSel.append(h("option", { value: n }, n));
  }).catch(() => {});
  const searchBox = h("input", { id: "f-search", type: "search", value: search });
  const whereBox = filterBox(where, workflow);
  const form = h("form", { class: "filters", role: "search", onsubmit: (ev) => { ev.preventDefault(); setQuery({ q: searchBox.value.trim(), where: whereBox.input.value.trim(), page: "0" }); } },
    h("label", { for: "f-status" }, "Status", statusSel), h("label", { for: "f-workflow" }, "Workflow", wfSel),
    h("label", { for: "f-search" }, "Search execution id", searchBox),
    h("label", { for: "f-where" }, "Filter", whereBox.input), whereBox.list, h("button", { type: "submit" }, "Search"));
  const params = new URLSearchParams();
  if (status) params.set("status", status);
  if (workflow) params.set("workflow", workflow);
  if (where) params.set("where", where);
  const body = live(3000, async () => {
    // The first draw asks only for the rows up to this page, so it appears at
    // once; the next asks for the newest 1000 to count them and to search.
    const quick = first && !search;
    first = false;
    params.set("limit", quick ? String((page + 1) * PAGE + 1) : "1000");
    let rows;
    try {
      rows = (await get(`/v1/executions?${params}`)).executions;
    } catch (err) {
      // A filter the server refused (INVALID_FILTER): its message names the field.
      if (err instanceof ApiError && err.code === "INVALID_FILTER") return h("p", { class: "err", role: "alert", id: "f-where-error" }, err.message);
      throw err;
    }
    if (search) rows = rows.filter((e) => e.execution_id.includes(search));
    if (search && !rows.length) {
      try {
        const one = await get(`/v1/executions/${encodeURIComponent(search)}`);
        rows = [{ execution_id: one.id, workflow: one.workflow, version: one.version, status: one.status,
          created_at_ms: one.created_at_ms, updated_at_ms: one.updated_at_ms, finished_at_ms: one.finished_at_ms,
          paused: one.paused, pause_reason: one.pause_reason }];
      } catch { rows = []; }
    }
    const now = Date.now();
    const counted = quick && rows.length > (page + 1) * PAGE ? "counting" : rows.length >= 1000 ? "1000+" : String(rows.length);
    const shown = rows.slice(page * PAGE, page * PAGE + PAGE);
    const out = [table(["Execution", "Workflow", "Status", "Started", "Last update", "Duration"],
      shown.map((e) => [execLink(e.execution_id), `${e.workflow} ${e.version}`, [st(e.status), pausedMark(e)],
        fmtTime(e.created_at_ms), fmtTime(e.updated_at_ms),
        fmtDur((FINISHED.has(e.status) ? e.updated_at_ms : now) - e.created_at_ms)]),
      `${counted} executions, newest first`),
    h("nav", { class: "pager", "aria-label": "Pages" },
      h("button", { type: "button", disabled: page === 0, onclick: () => setQuery({ page: String(page - 1) }) }, "Previous"),
      h("span", {}, `Page ${page + 1}${counted === "counting" ? "" : ` of ${Math.max(1, Math.ceil(rows.length / PAGE))}`}`),
      h("button", { type: "button", disabled: (page + 1) * PAGE >= rows.length, onclick: () => setQuery({ page: String(page + 1) }) }, "Next"))];
    if (quick) {
      // What the browser test reads: from opening the view to its first page drawn.
      requestAnimationFrame(() => { document.body.dataset.listRenderMs = String(Math.round(performance.now() - opened)); });
      setTimeout(() => body.refresh(), 0);
    }
    return out;
  });
  return [h("h1", {}, "Executions"), form, body];
}

// The filter box of the list (docs/language/visibility.md): a datalist
// offers the field names, built-in and declared, completing the word being typed.
const BUILTIN_FIELDS = ["status", "workflow", "version", "started", "ended"];
function filterBox(value, workflow) {
  const list = h("datalist", { id: "f-where-fields" });
  const input = h("input", { id: "f-where", type: "text", value, list: "f-where-fields", autocomplete: "off",
    spellcheck: "false", placeholder: 'customer == "c-1" and amount > 500' });
  let fields = [...BUILTIN_FIELDS];
  const offer = () => {
    const text = input.value;
    const word = /[A-Za-z_][A-Za-z0-9_]*$/.exec(text);
    const partial = word ? word[0] : "";
    const head = text.slice(0, text.length - partial.length);
    // Only where a field can start: at the beginning or after `and`, `or`, `not`, `(`.
    const atField = /(^|\b(and|or|not)\s+|\(\s*)$/.test(head);
    list.replaceChildren(...(atField ? fields.filter((f) => f.startsWith(partial) && f !== partial)
      .map((f) => h("option", { value: head + f })) : []));
  };
  input.addEventListener("input", offer);
  input.addEventListener("focus", offer);
  searchFields(workflow).then((declared) => { fields = [...new Set([...declared, ...BUILTIN_FIELDS])]; offer(); }).catch(() => {});
  return { input, list };
}

// The search fields the workflows declare (each workflow's newest version).
async function searchFields(workflow) {
  const { workflows } = await get("/v1/workflows");
  const names = [...new Set(workflows.map((w) => w.name))].filter((n) => !workflow || n === workflow);
  const docs = await Promise.all(names.map((n) => get(`/v1/workflows/${encodeURIComponent(n)}`).catch(() => null)));
  return [...new Set(docs.flatMap((d) => (d && d.search ? d.search.map((f) => f.name) : [])))].sort();
}

// ---- execution detail -----------------------------------------------------------------
const definitions = new Map();
async function definition(name, version) {
  const key = `${name}/${version}`;
  if (!definitions.has(key)) definitions.set(key, await get(`/v1/workflows/${encodeURIComponent(name)}/${encodeURIComponent(version)}`));
  return definitions.get(key);
}

async function executionDetail(id, q) {
  const path = `/v1/executions/${encodeURIComponent(id)}`;
  let doc;
  try { doc = await get(path); } catch (err) { return [h("h1", {}, `Execution ${id}`), problem(err)]; }
  const runParam = parseInt(q.get("run") || "0", 10);
  const current = doc.run || 1;
  if (runParam && runParam < current) return earlierRun(id, runParam, current);
  const def = await definition(doc.workflow, doc.version);
  const header = h("h1", {}, "Execution ", h("code", {}, id));
  const runSel = current > 1 ? h("label", { class: "inline", for: "run-sel" }, "Run",
    h("select", { id: "run-sel", onchange: (ev) => { location.hash = `#/executions/${encodeURIComponent(id)}${ev.target.value === String(current) ? "" : "?run=" + ev.target.value}`; } },
      Array.from({ length: current }, (_, i) => h("option", { value: i + 1, selected: i + 1 === current }, `run ${i + 1}`)))) : null;
  const refresh = h("input", { type: "checkbox", id: "autorefresh", checked: true });
  const actions = actionsPanel(id, def, () => doc, () => redraw());
  const sections = h("div", {});
  let lastSeq = -1;
  const redraw = async () => {
    if (lastSeq >= 0 && !refresh.checked) return;
    doc = await get(path);
    if ((doc.run || 1) !== current) { route(); return; }
    if (doc.last_seq === lastSeq) return;
    lastSeq = doc.last_seq;
    const history = (await get(`${path}/history`)).events;
    const open = new Set([...sections.querySelectorAll("details[open]")].map((d) => d.dataset.key));
    const drawn = detailSections(doc, def, history);
    // The same Actions node each time, so typed signal fields survive.
    drawn.splice(1, 0, actions.el);
    sections.replaceChildren(...drawn);
    for (const d of sections.querySelectorAll("details")) if (open.has(d.dataset.key)) d.open = true;
    actions.update(doc);
  };
  await redraw();
  every(2000, () => { if (!FINISHED.has(doc.status)) redraw().catch(() => {}); });
  return [header, h("div", { class: "filters" }, runSel, h("label", { class: "inline", for: "autorefresh" }, refresh, "Auto-refresh")),
    sections];
}

function detailSections(doc, def, history) {
  const run = doc.run || 1;
  const last = history[history.length - 1];
  const finished = doc.finished_at_ms;
  const migrations = history.filter((e) => e.type === "WorkflowMigrated");
  const info = [["Status", [st(doc.status), pausedMark(doc), run > 1 ? ` (run ${run})` : ""]],
    ["Paused", doc.paused ? `since ${fmtTime(doc.paused_at_ms)} (${fmtDur(Date.now() - doc.paused_at_ms)})${doc.pause_reason ? `: ${doc.pause_reason}` : ""}` : null],
    ["Waiting", doc.waiting ? h("span", { class: "why", "data-waiting": "" }, `${doc.waiting.message} (since ${fmtTime(doc.waiting.since_ms)})`) : null],
    ["Run", run > 1 ? [String(run), " ", link(`#/executions/${encodeURIComponent(doc.id)}?run=${run - 1}`, "previous run")] : "1"],
    ["Workflow", link(`#/workflows/${encodeURIComponent(doc.workflow)}/${encodeURIComponent(doc.version)}`, `${doc.workflow} ${doc.version}`)],
    ["Definition hash", h("code", {}, doc.definition_hash)],
    ["Migrated", migrations.length ? migrations.map((e) => `${migratedText(e)} at ${fmtTime(e.timestamp_ms)}`).join("; ") : null],
    ["Started", fmtTime(doc.created_at_ms)], ["Finished", finished ? fmtTime(finished) : null],
    ["Duration", fmtDur((finished || Date.now()) - doc.created_at_ms)],
    ["Since last update", fmtDur(Date.now() - doc.updated_at_ms)], ["History events", doc.last_seq],
    ["Schedule", doc.schedule_id ? link(`#/schedules/${encodeURIComponent(doc.schedule_id)}`, doc.schedule_id) : null],
    ["Parent", doc.parent ? [execLink(doc.parent.execution_id || doc.parent.id), ` step ${doc.parent.step || ""}`] : null],
    ["Abort reason", doc.abort ? JSON.stringify(doc.abort) : null], ["Compensation", doc.compensation || null],
    ["Running handler block", doc.handlers ? JSON.stringify(doc.handlers) : null]];
  const io = [h("h3", {}, "Input"), json(doc.input)];
  if ("output" in doc) io.push(h("h3", {}, "Output"), json(doc.output));
  if (doc.error) io.push(h("h3", {}, "Error"), json(doc.error));
  const signals = history.filter((e) => e.type === "SignalReceived");
  const delivered = new Map((doc.signals || []).filter((x) => x.delivered_to).map((x) => [x.seq, x.delivered_to]));
  // A child execution's id is <parent id>.<step>, or .<step>.<index> for a `for` element.
  const childSteps = new Set(def.steps.filter((s) => s.kind === "workflow").map((s) => s.name));
  const children = Object.entries(doc.units).filter(([k, u]) => childSteps.has(k.replace(/\[\d+\]$/, "")) && u.status && u.status !== "SKIPPED")
    .map(([k]) => [k, `${doc.id}.${k.replace(/\[(\d+)\]$/, ".$1")}`]);
  return [panel("Execution", kv(info)), panel("Input and result", io),
    panel("Graph", graph(def, doc.units)), panel("Steps", stepsTable(def, doc.units, doc.waiting_for)),
    children.length ? panel("Child executions", table(["Step", "Execution"], children.map(([k, id]) => [k, execLink(id)]))) : null,
    panel("Signals received", signals.length ? table(["Seq", "Name", "Received", "Unit", "Payload"],
      signals.map((e) => [e.seq, e.name, fmtTime(e.timestamp_ms), delivered.get(e.seq) || "", json(e.payload)])) : h("p", {}, "None")),
    panel("History", historyTable(history))].filter(Boolean);
}

// A live migration (issue 41) reads as the versions it moved between, with
// the steps it renamed; the full event stays one click away.
function migratedText(e) {
  const renamed = Object.entries(e.renamed || {}).map(([a, b]) => `${a} → ${b}`);
  return `${e.from_version} → ${e.to_version}` + (renamed.length ? ` (renamed ${renamed.join(", ")})` : "");
}
function historyTable(history) {
  const first = history.length ? history[0].timestamp_ms : 0;
  const about = (e) => (e.type === "WorkflowMigrated" ? h("span", { class: "migrated" }, migratedText(e)) : eventNote(e) || e.step || e.unit || e.signal || "");
  return table(["Seq", "+time", "Event", "Unit or signal", "Time"], history.map((e) => [e.seq, fmtDur(e.timestamp_ms - first),
    h("details", { "data-key": `ev-${e.seq}` }, h("summary", {}, e.type), json(e)), about(e), fmtTime(e.timestamp_ms)]));
}
// A line for the events beyond the book that carry no unit or signal of their own
// (operator actions, flow control); null for the book's events.
function eventNote(e) {
  switch (e.type) {
    case "WorkflowPaused": return `paused by an operator${e.reason ? `: ${e.reason}` : ""}`;
    case "WorkflowResumed": return "resumed by an operator";
    case "WorkflowRestarted": return `restarted from step ${e.step} as run ${e.next_run}${e.reason ? `: ${e.reason}` : ""}`;
    case "WorkflowForked": return `forked from ${e.source} run ${e.source_run} at step ${e.step}`;
    case "StepRestored": return `${e.step}: ${e.status} kept from run ${e.from_run}`;
    case "WorkflowWaiting":
      if (e.reason === "rate") return `waiting for a rate limit${e.label ? `: ${e.label} \`${e.key}\`` : ""} (${e.limit} per ${fmtDur(e.period_ms)})`;
      if (e.reason === "debounce") return `waiting for a debounce${e.label ? `: ${e.label} \`${e.key}\`` : ""} (${fmtDur(e.period_ms)} without another start)`;
      return `waiting for a ${e.reason} slot${e.label ? `: ${e.label} \`${e.key}\`` : ""} (limit ${e.limit})`;
    case "WorkflowDebounced": return "input replaced by a later start";
    case "WorkflowAdmitted": return `admitted after ${fmtDur(e.waited_ms)}`;
    default: return null;
  }
}
// The marker of a paused execution beside its status (list and detail).
function pausedMark(e) {
  if (!e.paused) return null;
  return [" ", h("span", { class: "st st-paused", "data-paused": "", title: e.pause_reason ? `paused: ${e.pause_reason}` : "paused" }, "paused")];
}

function unitAction(def, step) {
  if (!step) return "";
  const prefix = step.for ? `for ${step.for.var}: ` : "";
  switch (step.kind) {
    case "task": return prefix + step.task;
    case "compute": return prefix + "compute";
    case "await": return prefix + `await ${step.signal}`;
    case "sleep": return prefix + `sleep ${fmtMs(step.sleep_ms)}`;
    case "workflow": return prefix + `workflow ${step.workflow}`;
    default: return prefix + (step.task || step.kind || "");
  }
}
function allSteps(def) {
  const out = new Map();
  for (const s of def.steps) out.set(s.name, s);
  for (const [kind, steps] of Object.entries(def.handlers || {})) for (const s of steps) out.set(`on_${kind}:${s.name}`, s);
  return out;
}
function stepFor(def, key) {
  const steps = allSteps(def);
  if (steps.has(key)) return steps.get(key);
  const base = key.replace(/\[\d+\]$/, "").replace(/^compensate:/, "");
  if (steps.has(base)) return steps.get(base);
  const ev = /^on_event:([^@]+)@\d+:(.+)$/.exec(key);
  if (ev) for (const e of def.events || []) if (e.signal === ev[1]) return e.steps.find((s) => s.name === ev[2]);
  return null;
}
// A unit in one of these states waits: for a worker, a retry's delay, a timer or a signal.
const WAITS = new Set(["SCHEDULED", "RETRY_WAIT", "WAITING"]);
// `waiting_for` entries that no connected worker serves, by unit key (as `orbit status` reads them).
function unserved(waitingFor) {
  const out = new Map();
  for (const e of waitingFor || []) if (e.serving === 0) for (const k of e.units || []) out.set(k, e);
  return out;
}
function noWorker(e) {
  const where = e.runtime && e.runtime !== "any" ? ` on runtime ${e.runtime}` : "";
  return `no worker is polling for ${e.task}@${e.contract_version}${where}`;
}
// What a waiting unit waits for, in the words of `orbit status`; null when it does not wait.
function waitReason(u, step, waiting) {
  if (u.status === "SCHEDULED") return waiting ? noWorker(waiting) : "queued for a worker";
  if (u.status === "RETRY_WAIT") return `waiting to retry, due ${fmtTime(u.wake_at_ms)}`;
  if (u.status !== "WAITING") return null;
  if (step && step.kind === "sleep") return `timer fires ${fmtTime(u.wake_at_ms)}`;
  if (step && step.kind === "await") return `waiting for signal ${step.signal}${u.wake_at_ms ? `, times out ${fmtTime(u.wake_at_ms)}` : ""}`;
  return u.wake_at_ms ? `waiting until ${fmtTime(u.wake_at_ms)}` : "waiting";
}
function stepsTable(def, units, waitingFor) {
  const keys = [...Object.keys(units)];
  for (const s of def.steps) if (!keys.includes(s.name) && !keys.some((k) => k.startsWith(`${s.name}[`))) keys.push(s.name);
  const unservedBy = unserved(waitingFor);
  return table(["Unit", "Action", "Status", "Attempt", "Worker", "Started", "Finished", "Took", "Details"], keys.map((k) => {
    const u = units[k];
    const step = stepFor(def, k);
    if (!u) return [k, unitAction(def, step), "not started", "", "", "", "", "", ""];
    const begun = u.started_at_ms ?? u.dispatched_at_ms ?? u.scheduled_at_ms;
    const details = [];
    const waits = WAITS.has(u.status);
    const why = waitReason(u, step, unservedBy.get(k));
    if (why) details.push(h("div", { class: unservedBy.has(k) ? "why err" : "why" }, why));
    const error = u.error || u.last_error;
    if (error) details.push(h("div", { class: "err" }, `${error.code || ""}: ${error.message || JSON.stringify(error)}`));
    // A waiting unit has no worker; the one it remembers ran an earlier attempt.
    if (waits && u.worker_id) details.push(h("div", { class: "note" }, `earlier attempt on worker ${u.worker_id}`));
    if (!waits && u.wake_at_ms && u.status !== "SUCCEEDED") details.push(h("div", {}, `times out ${fmtTime(u.wake_at_ms)}`));
    const more = {};
    for (const f of ["input", "output", "idempotency_key"]) if (f in u) more[f] = u[f];
    if (Object.keys(more).length) details.push(h("details", { "data-key": `unit-${k}` }, h("summary", {}, "input, output, key"), json(more)));
    return [k, unitAction(def, step), st(u.status || "pending"),
      `${u.attempt ?? ""}${u.dispatch_count > 1 ? ` (${u.dispatch_count} deliveries)` : ""}`, waits ? "" : u.worker_id || "",
      fmtTime(begun), fmtTime(u.finished_at_ms), u.finished_at_ms && begun ? fmtDur(u.finished_at_ms - begun) : "", details];
  }));
}

// ---- queries, signals, cancel --------------------------------------------------------------
function fieldControl(name, type, id, required, hasDefault) {
  const kind = type.kind === "optional" ? type.type.kind : type.kind;
  if (kind === "bool") {
    return h("select", { id, name }, h("option", { value: "" }, required ? "choose" : hasDefault ? "default" : "null"),
      h("option", { value: "true" }, "true"), h("option", { value: "false" }, "false"));
  }
  if (["int", "float", "duration"].includes(kind)) return h("input", { id, name, type: "number", step: kind === "float" ? "any" : "1" });
  if (["string", "uuid", "timestamp", "bytes"].includes(kind)) return h("input", { id, name, type: "text" });
  return h("textarea", { id, name, placeholder: "JSON" });
}
function readField(el, type) {
  const kind = type.kind === "optional" ? type.type.kind : type.kind;
  const raw = el.value;
  if (raw === "") return undefined;
  if (kind === "bool") return raw === "true";
  if (["int", "duration"].includes(kind)) return Number.parseInt(raw, 10);
  if (kind === "float") return Number(raw);
  if (["string", "uuid", "timestamp", "bytes"].includes(kind)) return raw;
  try { return JSON.parse(raw); } catch { throw new Error(`${el.name}: not valid JSON`); }
}

function actionsPanel(id, def, current, changed) {
  const base = `/v1/executions/${encodeURIComponent(id)}`;
  const queries = (def.queries || []).map((q) => {
    const out = h("div", { "aria-live": "polite" });
    return h("div", {}, h("button", { type: "button", "data-query": q.name, onclick: async () => {
      try {
        const answer = await get(`${base}/queries/${encodeURIComponent(q.name)}`);
        out.replaceChildren(json(answer && "value" in answer ? answer.value : answer));
      } catch (err) { out.replaceChildren(problem(err)); }
    } }, `Run ${q.name}`), out);
  });
  const signals = (def.signals || []).map((sig) => {
    const fields = sig.payload && sig.payload.kind === "record" ? sig.payload.fields : null;
    const out = h("div", { "aria-live": "polite" });
    const controls = fields ? fields.map((f) => {
      const cid = `sig-${sig.name}-${f.name}`;
      const required = f.type.kind !== "optional" && !("default" in f);
      return [h("label", { for: cid }, `${f.name}${required ? " *" : ""}`, fieldControl(f.name, f.type, cid, required, "default" in f)), f];
    }) : [[h("label", { for: `sig-${sig.name}` }, "payload (JSON)", h("textarea", { id: `sig-${sig.name}`, name: "payload" })), null]];
    const form = h("form", { class: "signal", "data-signal": sig.name, "aria-label": `Signal ${sig.name}` }, h("strong", {}, `Signal ${sig.name}`),
      controls.map((c) => c[0]), h("button", { type: "submit" }, `Send ${sig.name}`), out);
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      try {
        let data;
        if (fields) {
          data = {};
          for (const [label, f] of controls) { const v = readField(label.querySelector("input,select,textarea"), f.type); if (v !== undefined) data[f.name] = v; }
        } else {
          const text = form.querySelector("textarea").value;
          data = text ? JSON.parse(text) : undefined;
        }
        const answer = await api("POST", `${base}/signals/${encodeURIComponent(sig.name)}`, data);
        out.replaceChildren(h("p", { role: "status" }, `Signal accepted as history event ${answer.seq}`));
      } catch (err) { out.replaceChildren(problem(err)); }
    });
    return form;
  });
  const reason = h("input", { id: "cancel-reason", type: "text" });
  const cancelOut = h("div", { "aria-live": "polite" });
  const dialog = h("dialog", { "aria-labelledby": "cancel-h" }, h("h2", { id: "cancel-h" }, "Cancel this execution?"),
    h("label", { for: "cancel-reason" }, "Reason (optional)", reason),
    h("div", { class: "filters" },
      h("button", { type: "button", class: "danger", onclick: async () => {
        dialog.close();
        try { await api("POST", `${base}/cancel`, reason.value ? { reason: reason.value } : {}); cancelOut.replaceChildren(h("p", { role: "status" }, "Cancellation requested")); } catch (err) { cancelOut.replaceChildren(problem(err)); }
      } }, "Confirm cancel"),
      h("button", { type: "button", onclick: () => dialog.close() }, "Keep running")));
  const cancel = h("button", { type: "button", class: "danger", onclick: () => dialog.showModal() }, "Cancel execution");
  const hold = pauseControls(base, changed);
  const again = rerunControls(id, def, base);
  const el = panel("Actions",
    queries.length ? [h("h3", {}, "Queries"), queries] : null,
    signals.length ? [h("h3", {}, "Signals"), signals] : null,
    h("h3", {}, "Pause"), hold.el,
    h("h3", {}, "Restart or fork"), again.el,
    h("h3", {}, "Cancel"), cancel, dialog, cancelOut);
  return { el, update: (doc) => { cancel.disabled = FINISHED.has(doc.status); hold.update(doc); } };
}

// Pause and resume (docs/operating-executions.md): the server refuses what
// does not apply, so the buttons only mirror the document's state.
function pauseControls(base, changed) {
  const reason = h("input", { id: "pause-reason", type: "text" });
  const out = h("div", { "aria-live": "polite" });
  const act = (label, action, body) => h("button", { type: "button", onclick: async () => {
    try {
      await api("POST", `${base}/${action}`, body());
      out.replaceChildren(h("p", { role: "status" }, label));
      await changed();
    } catch (err) { out.replaceChildren(problem(err)); }
  } }, action === "pause" ? "Pause" : "Resume");
  const pause = act("Paused", "pause", () => (reason.value ? { reason: reason.value } : {}));
  const resume = act("Resumed", "resume", () => ({}));
  const el = h("div", {}, h("div", { class: "filters" }, h("label", { for: "pause-reason" }, "Pause reason (optional)", reason), pause, resume), out);
  return { el, update: (doc) => {
    const ended = FINISHED.has(doc.status);
    pause.disabled = ended || !!doc.paused;
    resume.disabled = ended || !doc.paused;
  } };
}

// Restart and fork (docs/restart-and-fork.md): both first ask the server for
// a dry run and show its effect preview; the operator confirms, with `force`
// when the preview says a repeated effect needs it.
function rerunControls(id, def, base) {
  const stepSel = h("select", { id: "rerun-step" }, def.steps.map((s) => h("option", { value: s.name }, s.name)));
  const forkId = h("input", { id: "fork-id", type: "text", placeholder: "generated" });
  const forkVersion = h("input", { id: "fork-version", type: "text", placeholder: def.version });
  const out = h("div", { "aria-live": "polite" });
  const title = h("h2", { id: "rerun-h" }, "");
  const body = h("div", {});
  const confirm = h("button", { type: "button", class: "danger" }, "");
  const dialog = h("dialog", { class: "wide", "aria-labelledby": "rerun-h" }, title, body,
    h("div", { class: "filters" }, confirm, h("button", { type: "button", onclick: () => dialog.close() }, "Do nothing")));
  let pending = null;
  confirm.addEventListener("click", async () => {
    dialog.close();
    const { action, request, force } = pending;
    try {
      const done = await api("POST", `${base}/${action}`, { ...request, force });
      if (action === "restart") { out.replaceChildren(h("p", { role: "status" }, `Restarted from ${done.step}: run ${done.run}`)); route(); }
      else out.replaceChildren(h("p", { role: "status" }, "Forked as ", execLink(done.execution_id)));
    } catch (err) { out.replaceChildren(problem(err)); }
  });
  const preview = (action) => async () => {
    const request = { from: stepSel.value };
    if (action === "fork") {
      if (forkId.value.trim()) request.execution_id = forkId.value.trim();
      if (forkVersion.value.trim()) request.version = forkVersion.value.trim();
    }
    let dry;
    try { dry = await api("POST", `${base}/${action}`, { ...request, dry_run: true }); } catch (err) { out.replaceChildren(problem(err)); return; }
    // A fork keeps the generated id of its dry run, so the preview names the execution it makes.
    if (action === "fork") request.execution_id = dry.execution_id;
    const refused = dry.effects.filter((e) => e.needs_force);
    pending = { action, request, force: refused.length > 0 };
    title.textContent = action === "restart" ? `Restart ${id} from ${dry.step}?` : `Fork ${id} from ${dry.step} as ${dry.execution_id}?`;
    body.replaceChildren(
      h("p", {}, action === "restart" ? `A new run (run ${dry.run}) of ${dry.workflow} ${dry.version}.` : `A new execution of ${dry.workflow} ${dry.version}.`),
      kv([["Keeps", dry.kept.join(", ") || "nothing"], ["Runs again", dry.rerun.join(", ") || "nothing"]]),
      dry.effects.length ? table(["Step", "Task", "Effect", "Key", "Ran before", "Needs force"], dry.effects.map((e) => [e.step, e.task,
        e.effect, e.idempotency_key, e.ran_before ? "yes" : "no", e.needs_force ? h("strong", { class: "err" }, "needs force") : "no"]),
      "Task attempts that run") : h("p", {}, "No task runs again."),
      refused.length ? h("p", { class: "err", role: "alert" }, `This may repeat effects nobody declared safe to repeat: ${refused.map((e) => e.step).join(", ")}. Confirming forces it.`) : null);
    confirm.textContent = refused.length ? `${action === "restart" ? "Restart" : "Fork"} anyway (force)` : `Confirm ${action}`;
    dialog.showModal();
  };
  const el = h("div", {}, h("div", { class: "filters" },
    h("label", { for: "rerun-step" }, "From step", stepSel),
    h("button", { type: "button", onclick: preview("restart") }, "Restart from step…"),
    h("label", { for: "fork-id" }, "Fork id (optional)", forkId),
    h("label", { for: "fork-version" }, "Fork version (optional)", forkVersion),
    h("button", { type: "button", onclick: preview("fork") }, "Fork from step…")), dialog, out);
  return { el };
}

// ---- earlier runs: state rebuilt from the archived history --------------------------------------
async function earlierRun(id, run, current) {
  const history = (await get(`/v1/executions/${encodeURIComponent(id)}/history?run=${run}`)).events;
  const created = history.find((e) => e.type === "WorkflowCreated") || {};
  const cont = history.find((e) => e.type === "WorkflowContinuedAsNew");
  const def = await definition(created.workflow, created.version);
  const units = {};
  for (const e of history) {
    if (!e.step) continue;
    const u = units[e.step] || (units[e.step] = {});
    if (e.attempt) u.attempt = e.attempt;
    if (/Succeeded$/.test(e.type)) { u.status = "SUCCEEDED"; u.output = e.output; u.finished_at_ms = e.timestamp_ms; }
    else if (/Failed$/.test(e.type)) { u.status = "FAILED"; u.error = e.error; u.finished_at_ms = e.timestamp_ms; }
    else if (/Skipped$/.test(e.type)) u.status = "SKIPPED";
    else if (/Cancelled$/.test(e.type)) u.status = "CANCELLED";
    else if (!u.status || u.status === "pending") { u.status = "RUNNING"; u.started_at_ms = e.timestamp_ms; }
  }
  const first = history[0] || {};
  const last = history[history.length - 1] || {};
  return [h("h1", {}, "Execution ", h("code", {}, id), ` run ${run}`),
    h("p", {}, link(`#/executions/${encodeURIComponent(id)}`, "Back to the current run")),
    panel("Run", kv([["Run", `Run ${run} of ${current}`], ["Status", st("CONTINUED_AS_NEW")],
      ["Workflow", `${created.workflow} ${created.version}`], ["Definition hash", created.definition_hash],
      ["Started", fmtTime(first.timestamp_ms)], ["Ended", fmtTime(last.timestamp_ms)],
      ["Duration", fmtDur(last.timestamp_ms - first.timestamp_ms)], ["Events", history.length],
      ["Continued as", link(`#/executions/${encodeURIComponent(id)}${run + 1 < current ? `?run=${run + 1}` : ""}`, `run ${run + 1}`)]])),
    panel("Input and next input", h("h3", {}, "Input"), json(created.input), h("h3", {}, "Next input"), json(cont ? cont.input : null)),
    panel("Graph", graph(def, units, true)), panel("Steps", stepsTable(def, units)),
    panel("Signals received", table(["Seq", "Name", "Received", "Payload"], history.filter((e) => e.type === "SignalReceived")
      .map((e) => [e.seq, e.name, fmtTime(e.timestamp_ms), json(e.payload)]))),
    panel("History", historyTable(history))];
}

// ---- the graph ---------------------------------------------------------------------------------
// The same model as `orbit graph` (orbit_cli/graph.py) built from the same
// IR: one node per step, edges from `depends_on`, a dashed node per
// compensation, one lane per outcome and event handler block, and a
// continue-as-new node after the final steps. Columns are the longest
// dependency chain, so a step is always right of what it depends on.
const GRAPH_STATUS = {
  SUCCEEDED: "SUCCEEDED", RUNNING: "RUNNING", DISPATCHED: "RUNNING", SCHEDULED: "RUNNING", WAITING: "RUNNING",
  RETRY_WAIT: "RETRYING", UNCERTAIN: "RETRYING", ATTEMPT_FAILED: "RETRYING", FAILED: "FAILED",
  SKIPPED: "SKIPPED", CANCELLED: "SKIPPED",
};
function unitStatus(units, prefix, name) {
  if (!units) return null;
  const key = prefix + name;
  if (units[key]) return units[key].status;
  const elems = Object.entries(units).filter(([k]) => k.startsWith(`${key}[`)).map(([, u]) => u.status);
  return elems.length ? (elems.find((s) => s !== "SUCCEEDED") || "SUCCEEDED") : null;
}
function graph(def, units, earlier) {
  const W = 170, H = 44, GX = 40, GY = 22;
  const blocks = [{ label: null, prefix: "", steps: def.steps }];
  for (const [kind, steps] of Object.entries(def.handlers || {})) blocks.push({ label: `on ${kind}`, prefix: `on_${kind}:`, steps });
  for (const ev of [...(def.events || [])].sort((a, b) => a.signal.localeCompare(b.signal))) blocks.push({ label: `on event ${ev.signal}`, prefix: `on_event:${ev.signal}`, steps: ev.steps, event: true });
  const nodes = [], edges = [];
  let y = 8;
  for (const block of blocks) {
    if (block.label) { nodes.push({ lane: block.label, y: y + 14 }); y += 22; }
    const col = new Map();
    for (const s of block.steps) col.set(s.name, Math.max(0, ...(s.depends_on || []).filter((d) => col.has(d)).map((d) => col.get(d) + 1)));
    const rows = new Map(), pos = new Map();
    let maxRow = 0;
    for (const s of block.steps) {
      const c = col.get(s.name);
      const r = rows.get(c) || 0;
      rows.set(c, r + (s.compensate ? 2 : 1));
      maxRow = Math.max(maxRow, r + (s.compensate ? 2 : 1));
      const p = { x: 8 + c * (W + GX), y: y + r * (H + GY) };
      pos.set(s.name, p);
      let status;
      if (block.event) {
        const inst = units ? Object.entries(units).filter(([k]) => k.startsWith(`${block.prefix}@`) && k.endsWith(`:${s.name}`)) : [];
        status = inst.length ? inst[inst.length - 1][1].status : null;
        nodes.push({ ...p, lines: [inst.length ? `${s.name} ×${inst.length}` : s.name, unitAction(def, s)], status, id: `${block.prefix}:${s.name}` });
      } else {
        status = unitStatus(units, block.prefix, s.name);
        nodes.push({ ...p, lines: [s.name, unitAction(def, s)], status, id: block.prefix + s.name });
      }
      for (const d of s.depends_on || []) if (pos.has(d)) edges.push({ from: pos.get(d), to: p });
      if (s.compensate) {
        const cp = { x: p.x, y: p.y + H + GY };
        nodes.push({ ...cp, lines: [`compensate ${s.name}`, s.compensate.task || "compensate"], comp: true, status: unitStatus(units, "compensate:", s.name), id: `compensate:${s.name}` });
        edges.push({ from: p, to: cp, dash: true, down: true });
      }
    }
    if (!block.label && def.continue_as_new) {
      const depended = new Set(block.steps.flatMap((s) => s.depends_on || []));
      const finals = block.steps.filter((s) => !depended.has(s.name)).map((s) => pos.get(s.name));
      const c = Math.max(0, ...col.values()) + 1;
      const p = { x: 8 + c * (W + GX), y };
      const cond = def.continue_as_new.when ? "when …" : "always";
      nodes.push({ ...p, lines: ["continue as new", cond], can: true, status: earlier ? "CONTINUED" : null, id: "continue_as_new",
        title: "next run's input: " + JSON.stringify(def.continue_as_new.with ?? null) });
      for (const f of finals) edges.push({ from: f, to: p });
      // The dashed way back: the next run starts again at the first steps.
      for (const s of block.steps.filter((x) => !(x.depends_on || []).length)) edges.push({ from: p, to: pos.get(s.name), dash: true, back: true });
    }
    y += Math.max(1, maxRow) * (H + GY) + 8 + (!block.label && def.continue_as_new ? GY : 0);
  }
  const width = Math.max(W + 16, ...nodes.filter((n) => n.x !== undefined).map((n) => n.x + W + 8));
  const g = svg("svg", { width, height: y, viewBox: `0 0 ${width} ${y}`, role: "img", "aria-label": `Graph of ${def.name}` },
    svg("defs", {}, svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "10", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" },
      svg("path", { d: "M0,0 L10,5 L0,10 z", fill: "#57606a" }))));
  for (const e of edges) {
    const d = e.back ? `M${e.from.x + W / 2},${e.from.y + H} C${e.from.x + W / 2},${e.from.y + H + GY} ${e.to.x + W / 2},${e.to.y + H + GY} ${e.to.x + W / 2},${e.to.y + H}`
      : e.down ? `M${e.from.x + W / 2},${e.from.y + H} L${e.to.x + W / 2},${e.to.y}`
      : `M${e.from.x + W},${e.from.y + H / 2} C${e.from.x + W + GX / 2},${e.from.y + H / 2} ${e.to.x - GX / 2},${e.to.y + H / 2} ${e.to.x},${e.to.y + H / 2}`;
    g.append(svg("path", { class: `edge${e.dash ? " dash" : ""}`, d, "marker-end": e.down ? null : "url(#arrow)", "data-edge": e.back ? "continue" : null }));
  }
  for (const n of nodes) {
    if (n.lane) { g.append(svg("text", { class: "lane", x: 8, y: n.y }, n.lane)); continue; }
    const cls = GRAPH_STATUS[n.status] || (n.status === "CONTINUED" ? "CONTINUED" : "");
    const status = n.status ? `status ${n.status}` : units ? "not started" : "";
    g.append(svg("g", { class: `node${n.comp ? " comp" : ""}${n.can ? " can" : ""} g-${cls}`, "data-node": n.id },
      svg("title", {}, [status, n.title].filter(Boolean).join("; ") || n.lines[0]),
      svg("rect", { x: n.x, y: n.y, width: W, height: H, rx: 5 }),
      svg("text", { x: n.x + 8, y: n.y + 18 }, n.lines[0]),
      svg("text", { x: n.x + 8, y: n.y + 35, class: "note" }, n.lines[1] || "")));
  }
  return h("div", { class: "graph scroll", tabindex: "0", "aria-label": "Workflow graph (scrolls sideways)" }, g);
}

// ---- workflows ----------------------------------------------------------------------------------
function typeText(t) {
  if (!t) return "";
  switch (t.kind) {
    case "optional": return `${typeText(t.type)}?`;
    case "list": return `[${typeText(t.items)}]`;
    case "map": return `{String: ${typeText(t.values)}}`;
    case "record": return `{ ${(t.fields || []).map((f) => `${f.name}: ${typeText(f.type)}`).join(", ")} }`;
    default: return t.name || t.kind;
  }
}
async function workflowList() {
  return [h("h1", {}, "Workflows"), live(0, async () => {
    const list = (await get("/v1/workflows")).workflows;
    return table(["Name", "Version", "Description", "Steps", "Tasks", "Hash", "Executions"], list.map((w) => [
      link(`#/workflows/${encodeURIComponent(w.name)}/${encodeURIComponent(w.version)}`, w.name), w.version, w.description || "",
      w.steps.length, w.tasks.join(", "), h("code", {}, (w.definition_hash || "").slice(7, 19)),
      link(`#/executions?workflow=${encodeURIComponent(w.name)}`, "executions")]));
  })];
}
async function workflowPage(name, version) {
  const def = await get(`/v1/workflows/${encodeURIComponent(name)}${version ? "/" + encodeURIComponent(version) : ""}`);
  let others = [];
  try { others = (await get("/v1/workflows")).workflows.filter((w) => w.name === def.name && w.version !== def.version); } catch { others = []; }
  const fields = (t) => (t && t.kind === "record" ? table(["Field", "Type", "Default"], t.fields.map((f) => [f.name, typeText(f.type),
    "default" in f ? JSON.stringify(f.default) : f.type.kind === "optional" ? "null" : "required"])) : h("p", {}, typeText(t)));
  const steps = [...allSteps(def).entries()];
  return [h("h1", {}, `Workflow ${def.name} ${def.version}`),
    panel("Definition", kv([["Version", def.version], ["Description", def.description], ["Definition hash", h("code", {}, def.definition_hash)],
      ["IR version", def.ir_version], ["Timeout", def.timeout_ms ? fmtDur(def.timeout_ms) : "none"], ["Limits", def.limits ? JSON.stringify(def.limits) : null],
      ["Other versions", others.length ? others.map((w) => [link(`#/workflows/${encodeURIComponent(w.name)}/${encodeURIComponent(w.version)}`, w.version), " "]) : "none"],
      ["Executions", link(`#/executions?workflow=${encodeURIComponent(def.name)}`, "list")]])),
    await versionsPanel(def.name),
    panel("Input", fields(def.input)), panel("Output", fields(def.output)),
    panel("Signals", table(["Signal", "Payload"], (def.signals || []).map((s) => [s.name, typeText(s.payload)]))),
    panel("Queries", table(["Query", "Result type"], (def.queries || []).map((q) => [q.name, typeText(q.type || q.result)]))),
    panel("Graph", graph(def, null)),
    panel("Steps", table(["Step", "Action", "Depends on", "When", "Retry", "Timeout", "Compensation"], steps.map(([k, s]) => [k, unitAction(def, s),
      (s.depends_on || []).join(", "), s.when ? "yes" : "", s.retry ? JSON.stringify(s.retry) : "", s.timeout_ms ? fmtDur(s.timeout_ms) : "",
      s.compensate ? s.compensate.task || "yes" : ""]))),
    panel("Task contracts", table(["Name", "Version", "Input", "Output"], Object.values(def.contracts || {}).map((c) => [c.name, c.version || "",
      typeText(c.input), typeText(c.output)]))),
    def.continue_as_new ? panel("Continue as new", json(def.continue_as_new)) : null].filter(Boolean);
}

// The census of `orbit versions` (issue 41): per registered version, its live
// executions, where they wait and whether it drains, so an operator sees
// which versions (and their workers) can go.
async function versionsPanel(name) {
  let doc;
  try { doc = await get(`/v1/workflows/${encodeURIComponent(name)}/versions`); } catch (err) { return panel("Versions in production", problem(err)); }
  const waits = (v) => v.waiting.map((w) => `${w.step} (${w.kind}): ${w.count}`).join(", ");
  const lastLive = (v) => (v.drain !== "drained" ? "" : v.last_live_at_ms == null ? "never live" : fmtTime(v.last_live_at_ms));
  return panel("Versions in production", table(["Version", "Drain", "Live", "Paused", "Waiting in", "Tasks still called", "Last live"],
    doc.versions.map((v) => [link(`#/workflows/${encodeURIComponent(name)}/${encodeURIComponent(v.version)}`, v.version), st(v.drain),
      v.live, v.paused, waits(v), v.tasks.join(", "), lastLive(v)]), "Live executions and drain status per version"));
}

// ---- schedules -------------------------------------------------------------------------------------
const timing = (s) => (s.cron ? `cron "${s.cron}" ${s.timezone || "UTC"}` : `every ${s.interval}`);
const schedState = (s) => (s.paused ? "paused" : s.next_fire_at ? "active" : "ended");
async function scheduleList() {
  const out = h("div", { "aria-live": "polite" });
  const f = (id, label, el) => h("label", { for: id }, label, el);
  const form = h("form", { class: "sform", "aria-label": "New schedule", hidden: true },
    f("n-id", "Id *", h("input", { id: "n-id", name: "schedule_id" })), f("n-wf", "Workflow *", h("input", { id: "n-wf", name: "workflow" })),
    f("n-ver", "Version", h("input", { id: "n-ver", name: "version" })), f("n-cron", "Cron expression", h("input", { id: "n-cron", name: "cron" })),
    f("n-int", "Interval", h("input", { id: "n-int", name: "interval", placeholder: "15s" })), f("n-tz", "Time zone", h("input", { id: "n-tz", name: "timezone" })),
    f("n-ov", "Overlap", h("select", { id: "n-ov", name: "overlap" }, ["skip", "allow", "cancel_previous"].map((o) => h("option", {}, o)))),
    f("n-cu", "Catch-up", h("select", { id: "n-cu", name: "catchup" }, ["skip_missed", "run_once"].map((o) => h("option", {}, o)))),
    f("n-in", "Input (JSON)", h("textarea", { id: "n-in", name: "input" }, "{}")), f("n-desc", "Description", h("input", { id: "n-desc", name: "description" })),
    h("label", { class: "inline", for: "n-paused" }, h("input", { type: "checkbox", id: "n-paused", name: "paused" }), "Create paused"),
    h("button", { type: "submit" }, "Create schedule"), out);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const body = {};
    for (const el of form.querySelectorAll("input,select,textarea")) {
      if (el.type === "checkbox") { if (el.checked) body[el.name] = true; continue; }
      if (el.value === "") continue;
      if (el.name === "input") {
        try { body.input = JSON.parse(el.value); } catch { out.replaceChildren(h("p", { class: "err", role: "alert" }, "Input is not valid JSON")); return; }
      } else body[el.name] = el.value;
    }
    try { await api("POST", "/v1/schedules", body); location.hash = `#/schedules/${encodeURIComponent(body.schedule_id || "")}`; } catch (err) { out.replaceChildren(problem(err)); }
  });
  const toggle = h("button", { type: "button", onclick: () => { form.hidden = !form.hidden; if (!form.hidden) form.querySelector("input").focus(); } }, "New schedule");
  return [h("h1", {}, "Schedules"), toggle, form, live(5000, async () => {
    const list = (await get("/v1/schedules")).schedules;
    if (!list.length) return h("p", {}, "No schedules this credential may manage.");
    return table(["Id", "Workflow", "Timing", "State", "Next fire", "Last occurrence", "Last execution", "Started", "Skipped", "Last error"], list.map((s) => [
      link(`#/schedules/${encodeURIComponent(s.schedule_id)}`, s.schedule_id), `${s.workflow} ${s.version || "latest"}`, timing(s), st(schedState(s)),
      s.next_fire_at || "", s.last_fire_at || "", s.last_execution_id ? execLink(s.last_execution_id) : "", s.fired, s.skipped, s.last_error || ""]));
  })];
}
async function schedulePage(id) {
  const path = `/v1/schedules/${encodeURIComponent(id)}`;
  const out = h("div", { "aria-live": "polite" });
  const act = (label, action) => h("button", { type: "button", onclick: async () => {
    try {
      const r = await api("POST", `${path}/${action}`, {});
      if (action === "trigger") out.replaceChildren(r.started === false ? h("p", { role: "status" }, `Not started: the overlap policy skipped it (${r.skipped || "skip"})`)
        : h("p", { role: "status" }, "Started ", execLink(r.execution_id)));
      else out.replaceChildren(h("p", { role: "status" }, `${label} done`));
    } catch (err) { out.replaceChildren(problem(err)); }
  } }, label);
  const dialog = h("dialog", { "aria-labelledby": "del-h" }, h("h2", { id: "del-h" }, `Delete schedule ${id}?`),
    h("p", {}, "Executions it started are not affected."),
    h("button", { type: "button", class: "danger", onclick: async () => {
      dialog.close();
      try { await api("DELETE", path); location.hash = "#/schedules"; } catch (err) { out.replaceChildren(problem(err)); }
    } }, "Confirm delete"), " ", h("button", { type: "button", onclick: () => dialog.close() }, "Keep"));
  return [h("h1", {}, "Schedule ", h("code", {}, id)),
    h("div", { class: "filters" }, act("Pause", "pause"), act("Resume", "resume"), act("Trigger now", "trigger"),
      h("button", { type: "button", class: "danger", onclick: () => dialog.showModal() }, "Delete schedule…"), dialog), out,
    live(3000, async () => {
      const s = await get(path);
      let runs;
      try { runs = (await get(`/v1/executions?workflow=${encodeURIComponent(s.workflow)}&limit=1000`)).executions.filter((e) => e.execution_id.startsWith(`${id}:`)); } catch (err) { runs = err; }
      return [panel("Settings", kv([["Workflow", `${s.workflow} ${s.version || "latest"}`], ["Timing", timing(s)], ["Overlap", s.overlap], ["Catch-up", s.catchup],
        ["Start", s.start_at], ["End", s.end_at], ["Jitter", s.jitter], ["Description", s.description]])),
      panel("State", kv([["State", st(schedState(s))], ["Next fire", s.next_fire_at], ["Next occurrences", (s.next_fire_times || []).join(", ")],
        ["Last fire", s.last_fire_at], ["Last execution", s.last_execution_id ? execLink(s.last_execution_id) : null], ["Started", s.fired], ["Skipped", s.skipped], ["Last error", s.last_error]])),
      panel("Input", json(s.input)),
      panel("Executions started", runs instanceof Error ? problem(runs) : table(["Execution", "Status", "Started"], runs.map((e) => [execLink(e.execution_id), st(e.status), fmtTime(e.created_at_ms)])))];
    })];
}

// ---- workers -------------------------------------------------------------------------------------------
async function workersView() {
  return [h("h1", {}, "Workers"), live(5000, async () => {
    let list;
    try { list = (await get("/v1/workers")).workers; } catch (err) {
      if (err instanceof ApiError && err.status === 403) return h("p", {}, "Not permitted");
      throw err;
    }
    if (!list.length) return h("p", {}, "No workers have registered.");
    // `unused_contracts`: announced tasks no deployed workflow calls (a typo, another version).
    const unusedOf = (w) => new Set((w.unused_contracts || []).map((c) => `${c.task_name}@${c.contract_version}`));
    const anyUnused = list.some((w) => (w.unused_contracts || []).length);
    const note = h("p", { class: "note", role: "note" }, "Tasks marked unused are called by no deployed workflow, so no task will come for them: check the task name and contract version against the workflows.");
    return [table(["Worker", "State", "Runtime", "SDK", "Sessions", "In flight", "Tasks", "Registered", "Last seen"], list.map((w) => {
      const unused = unusedOf(w);
      return [w.worker_id, st(w.online ? "online" : "offline"), w.runtime, w.sdk || "", w.sessions, w.inflight,
        w.contracts.map((c, i) => [i ? ", " : "", h("span", { title: `contract version ${c.contract_version}` }, c.task_name),
          unused.has(`${c.task_name}@${c.contract_version}`) ? [" ", h("span", { class: "st st-paused unused", title: `no deployed workflow calls ${c.task_name}@${c.contract_version}` }, "unused")] : null]),
        fmtTime(w.registered_at_ms), fmtTime(w.last_seen_ms)];
    })), ...(anyUnused ? [note] : [])];
  })];
}

// ---- start -------------------------------------------------------------------------------------------------
window.addEventListener("hashchange", route);
document.addEventListener("DOMContentLoaded", async () => {
  document.getElementById("signout").addEventListener("click", () => signOut(""));
  // The hash is the route, so the skip link moves focus instead of following #main.
  document.querySelector(".skip").addEventListener("click", (ev) => {
    ev.preventDefault();
    document.getElementById("main").focus();
  });
  try {
    await signIn(null);
    route();
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) showSignIn(sessionStorage.getItem(TOKEN_KEY) ? "Token rejected" : "");
    else if (err instanceof ApiError && err.status === 403) signOut(`Not permitted: ${err.message}`);
    else document.getElementById("main").replaceChildren(problem(err));
  }
});
