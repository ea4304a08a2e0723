// The corestream console: reads the node's JSON API and draws it. No
// framework and no build: every view is one function from an answer to
// HTML, written with one innerHTML assignment so that a page of 1,000
// partitions costs one layout. docs/console.md describes it.
"use strict";

const clusterPollMs = 1000;    // nodes, liveness and rates
const partitionsPollMs = 2000; // the partition page
const topicsPollMs = 5000;     // the topic list
const groupsPollMs = 2000;     // the consumer groups and their lag

const $ = (id) => document.getElementById(id);

// esc makes any value safe inside HTML text and attributes.
function esc(v) {
  return String(v).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

// The login token (docs/console.md "Logging in"): with security.auth =
// scram every data route needs "Authorization: Bearer TOKEN". It lives
// in this tab's sessionStorage, never localStorage, so it dies with the
// tab and no other tab or later visit can read it.
const tokenKey = "corestream.token";
let token = sessionStorage.getItem(tokenKey) || "";

// api calls a route and answers its JSON; an error answer throws its
// message with its code, as docs/http.md shapes it. A 401 asks for a
// login, unless the token changed while the request was out: a poll
// sent before a login (without a token) answers 401 after it, and must
// not drop the new token. A 403 throws the refusal's message for the
// view to show.
async function api(method, path, body) {
  const init = { method, headers: {} };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  const sent = token;
  if (sent) init.headers["Authorization"] = "Bearer " + sent;
  const resp = await fetch(path, init);
  const json = await resp.json();
  if (!resp.ok) {
    const e = json.error || {};
    const msg = (e.code || resp.status) + ": " + (e.message || resp.statusText);
    if (resp.status === 401 && token === sent) showLogin(msg);
    const err = new Error(msg);
    err.status = resp.status;
    throw err;
  }
  return json;
}

// showLogin shows the login form with why it is needed (no token, or
// the token expired or was revoked); the token in hand is dropped.
function showLogin(why) {
  token = "";
  sessionStorage.removeItem(tokenKey);
  $("login-why").textContent = why;
  $("who").textContent = "";
  $("logout").hidden = true;
  if ($("login").hidden) {
    $("login").hidden = false;
    $("login-user").focus();
  }
}

// login trades a username and password for a token (POST /v1/login)
// and refreshes every view with it.
async function login(user, password) {
  token = "";
  const r = await api("POST", "/v1/login", { username: user, password });
  token = r.token;
  sessionStorage.setItem(tokenKey, token);
  $("login").hidden = true;
  $("login-password").value = "";
  $("who").textContent = r.user;
  $("logout").hidden = false;
  pollCluster();
  pollTopics();
  pollPartitions();
  pollGroups();
  pollHistory();
}

// logout forgets the token; the next data call asks for a login again.
function logout() {
  showLogin("logged out");
}

function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + units[i];
}

function rate(n) {
  if (n === null || n === undefined) return "–";
  return n >= 100 ? Math.round(n).toString() : n.toFixed(1);
}

// imbalance counts the primaries nodes lead beyond their count of
// preferred primaries: the moves that would even the counts, which is
// what the balancer evens (a partition led by another node than its
// preferred one, swapped with another, leaves the counts even).
function imbalance(nodes) {
  let extra = 0;
  for (const n of nodes) extra += Math.max(0, n.primaries - n.preferred_primaries);
  return extra;
}

// Rates come from two samples of GET /v1/cluster/stats.
let lastStats = new Map();

function rates(stats) {
  const out = new Map();
  for (const s of stats.nodes) {
    const prev = lastStats.get(s.node_id);
    if (s.error === null && prev && prev.error === null && s.time_ms > prev.time_ms) {
      const dt = (s.time_ms - prev.time_ms) / 1000;
      out.set(s.node_id, {
        produceReq: (s.produce_requests - prev.produce_requests) / dt,
        produceBytes: (s.produced_bytes - prev.produced_bytes) / dt,
        fetchReq: (s.fetch_requests - prev.fetch_requests) / dt,
        fetchBytes: (s.fetched_bytes - prev.fetched_bytes) / dt,
        produceErr: (s.produce_errors - prev.produce_errors) / dt,
        fetchErr: (s.fetch_errors - prev.fetch_errors) / dt,
      });
    }
  }
  lastStats = new Map(stats.nodes.map((s) => [s.node_id, s]));
  return out;
}

function renderCluster(c, r) {
  $("meta-primary").textContent = c.metadata_primary_id > 0 ? "node " + c.metadata_primary_id : "none";
  $("meta-generation").textContent = c.metadata_generation;
  $("partitions-count").textContent = c.partitions;
  $("under-replicated").textContent = c.under_replicated;
  $("under-replicated").className = c.under_replicated ? "warn" : "";
  $("offline").textContent = c.offline;
  $("offline").className = c.offline ? "bad" : "";
  const imb = imbalance(c.nodes);
  $("imbalance").textContent = imb;
  $("imbalance").className = imb ? "warn" : "";
  $("rebalancing").textContent = c.rebalance_in_progress ? "in progress" : "idle";
  const rows = c.nodes.map((n) => {
    const nr = r.get(n.node_id) || {};
    return `<tr data-node="${n.node_id}" data-alive="${n.alive}" data-primaries="${n.primaries}">` +
      `<td>${n.node_id}${n.node_id === c.metadata_primary_id ? " ★" : ""}</td>` +
      `<td class="${n.alive ? "up" : "down"}">${n.alive ? "up" : "down"}</td>` +
      `<td>${esc(n.http_addr)}</td><td>${n.primaries}</td><td>${n.preferred_primaries}</td><td>${n.replicas}</td>` +
      `<td>${rate(nr.produceReq)}</td><td>${nr.produceBytes === undefined ? "–" : bytes(Math.round(nr.produceBytes))}</td>` +
      `<td>${rate(nr.fetchReq)}</td><td>${nr.fetchBytes === undefined ? "–" : bytes(Math.round(nr.fetchBytes))}</td>` +
      `<td class="${nr.produceErr > 0 ? "bad" : ""}">${rate(nr.produceErr)}</td><td class="${nr.fetchErr > 0 ? "bad" : ""}">${rate(nr.fetchErr)}</td></tr>`;
  });
  $("nodes").tBodies[0].innerHTML = rows.join("");
  // The primary filter offers every node.
  const sel = $("filter-primary");
  if (sel.options.length !== c.nodes.length + 1) {
    const keep = sel.value;
    sel.innerHTML = `<option value="">any primary</option>` +
      c.nodes.map((n) => `<option value="${n.node_id}">node ${n.node_id}</option>`).join("");
    sel.value = keep;
  }
}

async function pollCluster() {
  try {
    const [c, s] = await Promise.all([api("GET", "/v1/cluster"), api("GET", "/v1/cluster/stats")]);
    renderCluster(c, rates(s));
    $("status").textContent = "updated " + new Date().toLocaleTimeString();
    $("status").className = "muted";
  } catch (e) {
    $("status").textContent = String(e.message || e);
    $("status").className = "bad";
  }
}

function renderTopics(list) {
  $("topics").tBodies[0].innerHTML = list.topics.map((t) =>
    `<tr data-topic="${esc(t.name)}"><td>${esc(t.name)}</td><td class="muted">${esc(t.id)}</td><td>${t.partitions}</td>` +
    `<td>${t.replication_factor}</td><td><button type="button" data-delete="${esc(t.name)}">delete</button></td></tr>`).join("");
  const sel = $("filter-topic");
  const keep = sel.value;
  sel.innerHTML = `<option value="">every topic</option>` +
    list.topics.map((t) => `<option value="${esc(t.name)}">${esc(t.name)}</option>`).join("");
  sel.value = list.topics.some((t) => t.name === keep) ? keep : "";
}

async function pollTopics() {
  try {
    renderTopics(await api("GET", "/v1/topics"));
  } catch (e) {
    // The cluster poll reports a node that does not answer; a refusal
    // of the topic list alone (403) is said here.
    if (e.status === 403) $("create-result").textContent = String(e.message);
  }
}

const ids = (l) => l.join(",");

// The partition table is virtual: a page's rows are built as strings
// once per answer, and only those in view (plus overscanRows either
// side) are in the DOM, between two spacer rows that keep the scroll
// height. Layout, not parsing, is what a long table costs: 10,000 rows
// in the DOM took seconds to lay out, the rows in view take
// milliseconds, whatever the page size.
const overscanRows = 30;
let rowHeightPx = 26; // measured from the first row drawn
let partitionRows = [];

// drawPartitionRows puts the rows in view into the table.
function drawPartitionRows() {
  const box = $("partitions-scroll");
  const count = Math.ceil(box.clientHeight / rowHeightPx) + 2 * overscanRows;
  // scrollTop may still be that of a longer page: the last rows then.
  const first = Math.min(Math.max(0, Math.floor(box.scrollTop / rowHeightPx) - overscanRows),
    Math.max(0, partitionRows.length - count));
  const last = Math.min(partitionRows.length, first + count);
  const body = $("partitions").tBodies[0];
  body.innerHTML = `<tr class="spacer"><td colspan="14"></td></tr>` + partitionRows.slice(first, last).join("") +
    `<tr class="spacer"><td colspan="14"></td></tr>`;
  const drawn = body.rows.length > 2 ? body.rows[1].getBoundingClientRect().height : 0;
  if (drawn > 0) rowHeightPx = drawn;
  body.rows[0].style.height = first * rowHeightPx + "px";
  body.rows[body.rows.length - 1].style.height = (partitionRows.length - last) * rowHeightPx + "px";
}

// txnCell is a partition's open transactions and, while any is open, the
// last stable offset read_committed consumers stop at.
function txnCell(log) {
  if (!log.open_transactions) return "0";
  return `<span class="warn">${log.open_transactions} (LSO ${log.last_stable_offset})</span>`;
}

// renderPartitions draws one page of GET /v1/partitions. It is exposed
// for the render measurement (docs/console.md).
function renderPartitions(page) {
  const rows = new Array(page.partitions.length);
  for (let i = 0; i < page.partitions.length; i++) {
    const p = page.partitions[i];
    const log = p.log;
    rows[i] = `<tr data-topic="${esc(p.topic)}" data-partition="${p.partition}" data-primary="${p.primary_id}">` +
      `<td>${esc(p.topic)}</td><td>${p.partition}</td><td>${p.primary_id > 0 ? p.primary_id : "none"}</td>` +
      `<td>${p.generation}</td><td>${p.preferred_primary_id}</td><td>${ids(p.replicas)}</td><td>${ids(p.in_sync)}</td>` +
      `<td>${ids(p.offline)}</td><td class="${p.state === "online" ? "" : p.state === "offline" ? "bad" : "warn"}">${p.state}</td>` +
      `<td>${log ? log.high_watermark : "–"}</td><td>${log ? log.log_end_offset : "–"}</td><td>${log ? bytes(log.size_bytes) : "–"}</td>` +
      `<td>${log ? txnCell(log) : "–"}</td><td>${log && log.dirty_ratio != null ? Math.round(log.dirty_ratio * 100) + " %" : "–"}</td></tr>`;
  }
  partitionRows = rows;
  drawPartitionRows();
  const last = page.offset + page.partitions.length;
  $("page-info").textContent = page.total ? `${page.offset + 1}–${last} of ${page.total}` : "none";
  $("page-prev").disabled = page.offset === 0;
  $("page-next").disabled = last >= page.total;
}

let pageOffset = 0;

function partitionsQuery() {
  const q = new URLSearchParams();
  if ($("filter-topic").value) q.set("topic", $("filter-topic").value);
  if ($("filter-state").value !== "all") q.set("state", $("filter-state").value);
  if ($("filter-primary").value) q.set("primary_id", $("filter-primary").value);
  q.set("offset", pageOffset);
  q.set("limit", $("page-size").value);
  return "/v1/partitions?" + q.toString();
}

let partitionsBusy = false;

async function pollPartitions() {
  if (partitionsBusy) return; // one page request at a time
  partitionsBusy = true;
  try {
    const page = await api("GET", partitionsQuery());
    if (page.total > 0 && page.offset >= page.total) {
      pageOffset = Math.max(0, page.total - Number($("page-size").value));
    } else {
      renderPartitions(page);
    }
  } catch (e) {
    $("page-info").textContent = String(e.message || e);
  } finally {
    partitionsBusy = false;
  }
}

// The consumer groups: one page of GET /v1/groups (filtered by name on
// the node), and the partitions of the group clicked, from GET
// /v1/groups/{group}, both answered by each group's coordinator. A null
// figure (no coordinator answer, a primary that did not answer) shows
// as "–".
const groupsPageSize = 100;
let selectedGroup = "";
const orDash = (v) => (v === null || v === undefined ? "–" : esc(v));

function renderGroups(list) {
  $("groups").tBodies[0].innerHTML = list.groups.map((g) =>
    `<tr data-group="${esc(g.group)}" class="${g.group === selectedGroup ? "selected" : ""}">` +
    `<td>${esc(g.group)}</td><td>${orDash(g.state)}</td><td>${orDash(g.members)}</td><td>${g.partitions}</td>` +
    `<td class="${g.lag > 0 ? "warn" : ""}">${g.error ? `<span class="bad">${esc(g.error)}</span>` : g.lag}</td>` +
    `<td>${g.end_unknown || ""}</td></tr>`).join("");
  $("groups-info").textContent = list.total > list.groups.length ?
    `${list.groups.length} of ${list.total} (narrow the filter)` : `${list.total} group${list.total === 1 ? "" : "s"}`;
}

// assigned is a member's assignment as "topic 0,1,2; other 3".
const assigned = (m) => (m.assignment || []).map((a) => `${a.topic} ${a.partitions.join(",")}`).join("; ");

// lastGroupDetail is the group drawn last, for its trend column.
let lastGroupDetail = null;

function renderGroupDetail(g) {
  lastGroupDetail = g;
  $("group-detail").hidden = false;
  $("group-detail-name").textContent = `${g.group}: lag ${g.lag}` + (g.end_unknown ? ` (${g.end_unknown} partitions unknown)` : "");
  $("group-members").textContent = g.members === null ?
    `members: none (coordinator node ${g.coordinator_id} holds no such group: its offsets are from before groups moved to __groups)` :
    `${g.state}, generation ${g.generation}, ${g.members.length} member${g.members.length === 1 ? "" : "s"}`;
  $("group-member-list").tBodies[0].innerHTML = (g.members || []).map((m) =>
    `<tr data-member="${esc(m.member_id)}"><td>${esc(m.member_id)}</td><td>${esc(m.client_id)}</td><td>${esc(m.host)}</td>` +
    `<td class="assignment">${esc(assigned(m)) || "–"}</td></tr>`).join("");
  // Each partition's member: the one whose assignment holds it.
  const owner = new Map();
  for (const m of g.members || []) {
    for (const a of m.assignment || []) for (const p of a.partitions) owner.set(a.topic + "/" + p, m.client_id || m.member_id);
  }
  const trends = new Map(lastHistory ? groupPartitionSeries(lastHistory.nodes, g.group).map((s) => [s.name, lagTrend(s.points)]) : []);
  $("group-partitions").tBodies[0].innerHTML = g.partitions.map((p) => {
    const key = p.topic + "/" + p.partition, tr = trends.get(key);
    const trend = tr === undefined || tr === null ? "–" : tr > 0 ? `↑ ${tr}` : tr < 0 ? `↓ ${-tr}` : "→ 0";
    return `<tr data-topic="${esc(p.topic)}" data-partition="${p.partition}"><td>${esc(p.topic)}</td><td>${p.partition}</td>` +
      `<td>${esc(owner.get(key) || "–")}</td><td>${p.committed}</td><td>${orDash(p.end)}</td>` +
      `<td class="${p.lag > 0 ? "warn" : ""}">${orDash(p.lag)}</td><td class="trend" title="change of the lag over the last minute charted">${esc(trend)}</td></tr>`;
  }).join("");
  renderGroupTrend();
}

// renderGroupTrend draws the open group's lag per partition over the
// charts' history, with the charts' marks.
function renderGroupTrend() {
  if (!lastGroupDetail || !lastHistory) return;
  const h = lastHistory;
  $(groupTrendDef.id).innerHTML = chartSVG(groupTrendDef, groupPartitionSeries(h.nodes, lastGroupDetail.group), h.marks, h.t0, h.t1);
}

let groupsBusy = false;

async function pollGroups() {
  if (groupsBusy) return;
  groupsBusy = true;
  try {
    const q = new URLSearchParams({ limit: groupsPageSize });
    if ($("groups-filter").value) q.set("filter", $("groups-filter").value);
    renderGroups(await api("GET", "/v1/groups?" + q.toString()));
    if (selectedGroup) {
      try {
        renderGroupDetail(await api("GET", "/v1/groups/" + encodeURIComponent(selectedGroup)));
      } catch (e) {
        $("group-members").textContent = String(e.message || e);
        $("group-partitions").tBodies[0].innerHTML = "";
      }
    }
  } catch (e) {
    $("groups-info").textContent = String(e.message || e);
  } finally {
    groupsBusy = false;
  }
}

async function act(resultId, fn) {
  const out = $(resultId);
  out.textContent = "…";
  out.className = "muted";
  try {
    out.textContent = await fn();
  } catch (e) {
    out.textContent = String(e.message || e);
    out.className = "bad";
  }
  pollCluster();
  pollTopics();
  pollPartitions();
}

function wire() {
  $("login").addEventListener("submit", (ev) => {
    ev.preventDefault();
    $("login-result").textContent = "…";
    login($("login-user").value, $("login-password").value).then(() => {
      $("login-result").textContent = "";
    }).catch((e) => {
      $("login-result").textContent = String(e.message || e);
    });
  });
  $("logout").addEventListener("click", logout);
  $("rebalance-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    act("rebalance-result", async () => {
      const r = await api("POST", "/v1/rebalance", { dry_run: $("rebalance-dry").checked });
      const plan = r.moves.length + " move" + (r.moves.length === 1 ? "" : "s");
      return r.started ? "started: " + plan : "planned: " + plan;
    });
  });
  $("create-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    act("create-result", async () => {
      const t = await api("POST", "/v1/topics", {
        name: $("create-name").value, partitions: Number($("create-partitions").value),
        replication_factor: Number($("create-rf").value),
      });
      return `created ${t.name}: ${t.partitions} partitions, replication ${t.replication_factor}`;
    });
  });
  $("topics").addEventListener("click", (ev) => {
    const name = ev.target.dataset && ev.target.dataset.delete;
    if (!name || !confirm(`Delete topic ${name} and all its records?`)) return;
    act("create-result", async () => {
      await api("DELETE", "/v1/topics/" + encodeURIComponent(name));
      return "deleted " + name;
    });
  });
  $("move-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    act("move-result", async () => {
      const t = $("move-topic").value, p = $("move-partition").value;
      const r = await api("POST", `/v1/topics/${encodeURIComponent(t)}/partitions/${p}/primary`, { node_id: Number($("move-node").value) });
      return `${r.topic}/${r.partition}: primary node ${r.primary_id}, generation ${r.generation}`;
    });
  });
  for (const id of ["filter-topic", "filter-state", "filter-primary", "page-size"]) {
    $(id).addEventListener("change", () => { pageOffset = 0; $("partitions-scroll").scrollTop = 0; pollPartitions(); });
  }
  $("page-prev").addEventListener("click", () => {
    pageOffset = Math.max(0, pageOffset - Number($("page-size").value));
    $("partitions-scroll").scrollTop = 0;
    pollPartitions();
  });
  let drawQueued = false;
  $("partitions-scroll").addEventListener("scroll", () => {
    if (drawQueued) return;
    drawQueued = true;
    requestAnimationFrame(() => { drawQueued = false; drawPartitionRows(); });
  });
  $("groups").addEventListener("click", (ev) => {
    const row = ev.target.closest("tr[data-group]");
    if (!row) return;
    selectedGroup = row.dataset.group;
    pollGroups();
  });
  let filterTimer = 0;
  $("groups-filter").addEventListener("input", () => {
    clearTimeout(filterTimer);
    filterTimer = setTimeout(pollGroups, 200);
  });
  $("page-next").addEventListener("click", () => {
    pageOffset += Number($("page-size").value);
    $("partitions-scroll").scrollTop = 0;
    pollPartitions();
  });
}

window.corestreamConsole = { renderPartitions, renderCharts };

// The node serving the page, once: its answers are what the page shows.
api("GET", "/v1/health").then((h) => {
  $("served-by").textContent = `node ${h.node_id} · ${h.version}`;
}).catch(() => {});

wire();
pollCluster();
pollTopics();
pollPartitions();
pollGroups();
pollHistory(); // charts.js
setInterval(pollCluster, clusterPollMs);
setInterval(pollHistory, historyPollMs);
setInterval(pollGroups, groupsPollMs);
setInterval(pollTopics, topicsPollMs);
setInterval(pollPartitions, partitionsPollMs);
