// The console's charts: drawn by this page, as inline SVG, from the
// nodes' own figures (GET /v1/cluster/history: each node's ring of
// samples, docs/console.md "Charts"). Nothing is fetched from anywhere
// else and nothing is drawn by a library: a chart is one SVG string
// built from the samples and set with one innerHTML assignment.
//
// Every plotted line carries its values (data-values) and every mark its
// kind and time (data-kind, data-time), so that a test, or a curious
// operator, reads from the DOM what the chart shows.
"use strict";

const historyPollMs = 5000;   // the nodes sample every http.history_interval_ms (5 s by default)
const chartWidthPx = 460;
const chartHeightPx = 150;
const chartPadLeftPx = 70;    // the y axis' labels
const chartPadBottomPx = 18;  // the time axis' labels
const chartSeriesMax = 8;     // lines per chart; the legend counts the rest
const chartColors = ["#0969da", "#cf222e", "#1a7f37", "#8250df", "#bf8700", "#1b7c83", "#d2499b", "#57606a"];

// chartDefs are the charts, in page order. A node chart draws one line
// per node: the rate of a counter, or a gauge as it is.
const chartDefs = [
  { id: "chart-produce-bytes", title: "produce bytes/s", counter: "produced_bytes", unit: "bytes" },
  { id: "chart-produce-records", title: "produce msg/s", counter: "produced_records", unit: "rate" },
  { id: "chart-fetch-bytes", title: "fetch bytes/s", counter: "fetched_bytes", unit: "bytes" },
  { id: "chart-fetch-records", title: "fetch msg/s", counter: "fetched_records", unit: "rate" },
  { id: "chart-topic-records", title: "produce msg/s by topic", topics: true, unit: "rate" },
  { id: "chart-under-replicated", title: "under-replicated partitions (by primary) and offline", gauge: "under_replicated", unit: "count" },
  { id: "chart-group-lag", title: "consumer group lag (records)", groups: true, unit: "count" },
];

// nodeRates is one node's rate of counter between neighbouring samples,
// as [time_ms, per second] points; a counter that went down (the node
// restarted) starts again from its next sample.
function nodeRates(samples, counter) {
  const out = [];
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1], b = samples[i];
    const dt = (b.time_ms - a.time_ms) / 1000;
    const d = b[counter] - a[counter];
    if (dt > 0 && d >= 0) out.push([b.time_ms, d / dt]);
  }
  return out;
}

// topicRates are each topic's produce rate over the cluster: the rate
// of every node's count of the topic's records (it counts the partitions
// it leads), summed over the nodes by sampling interval, as
// {topic: [[time_ms, per second]]}.
function topicRates(nodes, intervalMs) {
  const byTopic = new Map(); // topic -> Map(interval index -> per second)
  for (const n of nodes) {
    const perTopic = new Map(); // topic -> [[time_ms, records]]
    for (const s of n.samples) {
      for (const tr of s.topics || []) {
        if (!perTopic.has(tr.topic)) perTopic.set(tr.topic, []);
        perTopic.get(tr.topic).push({ time_ms: s.time_ms, records: tr.records });
      }
    }
    for (const [topic, samples] of perTopic) {
      if (!byTopic.has(topic)) byTopic.set(topic, new Map());
      const sums = byTopic.get(topic);
      for (const [t, v] of nodeRates(samples, "records")) {
        const i = Math.round(t / intervalMs);
        sums.set(i, (sums.get(i) || 0) + v);
      }
    }
  }
  const out = new Map();
  for (const [topic, sums] of byTopic) {
    out.set(topic, [...sums].sort((a, b) => a[0] - b[0]).map(([i, v]) => [i * intervalMs, v]));
  }
  return out;
}

// byLatest orders lines by their last value, largest first, then name.
function byLatest(a, b) {
  const last = (s) => s.points.length ? s.points[s.points.length - 1][1] : -1;
  return last(b) - last(a) || (a.name < b.name ? -1 : 1);
}

// chartSeries are a chart's lines: [{name, points: [[time_ms, value]]}].
function chartSeries(def, nodes, intervalMs) {
  const series = [];
  if (def.topics) {
    for (const [name, points] of topicRates(nodes, intervalMs)) series.push({ name, points });
    return series.sort(byLatest);
  }
  if (def.groups) {
    // A group's lag is in its coordinator's samples; a group whose
    // coordinator moved is in two nodes' samples, merged by time.
    const byGroup = new Map();
    for (const n of nodes) {
      for (const s of n.samples) {
        for (const g of s.groups) {
          if (!byGroup.has(g.group)) byGroup.set(g.group, []);
          byGroup.get(g.group).push([s.time_ms, g.lag]);
        }
      }
    }
    for (const [name, points] of byGroup) {
      points.sort((a, b) => a[0] - b[0]);
      series.push({ name, points });
    }
    // The groups lagging most now first.
    return series.sort(byLatest);
  }
  for (const n of nodes) {
    const points = def.counter ? nodeRates(n.samples, def.counter) : n.samples.map((s) => [s.time_ms, s[def.gauge]]);
    series.push({ name: "node " + n.node_id, points, color: chartColors[(n.node_id - 1) % chartColors.length] });
  }
  if (def.gauge === "under_replicated") {
    // Offline partitions are counted by the metadata primary only.
    const points = [];
    for (const n of nodes) {
      for (const s of n.samples) {
        if (s.metadata_primary_id === n.node_id) points.push([s.time_ms, s.offline]);
      }
    }
    points.sort((a, b) => a[0] - b[0]);
    series.push({ name: "offline", points, color: "#24292f" });
  }
  return series;
}

// chartMarks are the events to mark on every chart's time axis: primary
// moves, metadata primary elections and nodes going down, each once
// however many nodes saw it (within one sampling interval).
function chartMarks(nodes, intervalMs) {
  const marks = [];
  const add = (kind, t, text) => {
    if (!marks.some((m) => m.kind === kind && Math.abs(m.time - t) <= intervalMs)) marks.push({ kind, time: t, text });
  };
  for (const n of nodes) {
    for (let i = 1; i < n.samples.length; i++) {
      const a = n.samples[i - 1], b = n.samples[i];
      if (b.primary_moves > a.primary_moves) add("primary-move", b.time_ms, `primary moves finished on node ${n.node_id}`);
      if (b.metadata_generation > a.metadata_generation) {
        add("election", b.time_ms, `metadata primary elected: node ${b.metadata_primary_id}, generation ${b.metadata_generation}`);
      }
      if (b.nodes_alive < a.nodes_alive) add("node-down", b.time_ms, `${a.nodes_alive - b.nodes_alive} node(s) down, as node ${n.node_id} saw it`);
      if (b.nodes_alive > a.nodes_alive) add("node-up", b.time_ms, `${b.nodes_alive - a.nodes_alive} node(s) back, as node ${n.node_id} saw it`);
    }
  }
  return marks.sort((a, b) => a.time - b.time);
}

// axisLabel writes v in the chart's unit.
function axisLabel(unit, v) {
  if (unit === "bytes") return bytes(Math.round(v)) + "/s";
  if (unit === "rate") return rate(v) + "/s";
  return String(Math.round(v));
}

// niceMax rounds a chart's top up to 1, 2 or 5 times a power of ten (a
// chart of nothing is 0..1).
function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

// seriesColor is a line's colour: a node's own whatever nodes answered,
// else by its place in the chart.
const seriesColor = (s, i) => s.color || chartColors[i % chartColors.length];

// chartSVG draws one chart of series and marks over [t0, t1].
function chartSVG(def, series, marks, t0, t1) {
  const w = chartWidthPx, h = chartHeightPx, left = chartPadLeftPx, bottom = h - chartPadBottomPx;
  const shown = series.slice(0, chartSeriesMax);
  let top = 0;
  for (const s of shown) for (const p of s.points) top = Math.max(top, p[1]);
  top = niceMax(top);
  const span = Math.max(t1 - t0, 1);
  const x = (t) => (left + (t - t0) / span * (w - left - 4)).toFixed(1);
  const y = (v) => (bottom - v / top * (bottom - 6)).toFixed(1);
  const parts = [`<svg viewBox="0 0 ${w} ${h}" width="${w}" height="${h}" role="img" aria-label="${esc(def.title)}">`];
  parts.push(`<line x1="${left}" y1="${bottom}" x2="${w - 4}" y2="${bottom}" stroke="#d0d7de"/>`);
  parts.push(`<line x1="${left}" y1="6" x2="${w - 4}" y2="6" stroke="#eaeef2"/>`);
  parts.push(`<text x="${left - 4}" y="12" text-anchor="end" font-size="10" fill="#57606a">${esc(axisLabel(def.unit, top))}</text>`);
  parts.push(`<text x="${left - 4}" y="${bottom}" text-anchor="end" font-size="10" fill="#57606a">0</text>`);
  const clock = (t) => new Date(t).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  parts.push(`<text x="${left}" y="${h - 4}" font-size="10" fill="#57606a">${esc(clock(t0))}</text>`);
  parts.push(`<text x="${w - 4}" y="${h - 4}" text-anchor="end" font-size="10" fill="#57606a">${esc(clock(t1))}</text>`);
  for (const m of marks) {
    if (m.time < t0 || m.time > t1) continue;
    const color = m.kind === "node-down" ? "#cf222e" : m.kind === "election" ? "#bf8700" : m.kind === "node-up" ? "#1a7f37" : "#8250df";
    parts.push(`<line class="mark" data-kind="${m.kind}" data-time="${m.time}" x1="${x(m.time)}" y1="6" x2="${x(m.time)}" y2="${bottom}" ` +
      `stroke="${color}" stroke-width="2" stroke-dasharray="3 3"><title>${esc(clock(m.time) + ": " + m.text)}</title></line>`);
  }
  shown.forEach((s, i) => {
    const pts = s.points.filter((p) => p[0] >= t0);
    const values = pts.map((p) => +p[1].toFixed(3)).join(",");
    parts.push(`<polyline class="series" data-name="${esc(s.name)}" data-values="${values}" fill="none" stroke="${seriesColor(s, i)}" ` +
      `stroke-width="1.5" points="${pts.map((p) => x(p[0]) + "," + y(p[1])).join(" ")}"><title>${esc(s.name)}</title></polyline>`);
  });
  parts.push("</svg>");
  const legend = shown.map((s, i) => {
    const last = s.points.length ? s.points[s.points.length - 1][1] : null;
    return `<span class="legend-item"><svg width="10" height="10"><rect width="10" height="10" fill="${seriesColor(s, i)}"/></svg> ` +
      `${esc(s.name)} <span class="muted">${last === null ? "–" : esc(axisLabel(def.unit, last))}</span></span>`;
  });
  if (series.length > shown.length) legend.push(`<span class="muted">+${series.length - shown.length} more</span>`);
  return `<figcaption>${esc(def.title)}</figcaption>` + parts.join("") + `<div class="legend">${legend.join(" ")}</div>`;
}

// renderCharts draws every chart from one GET /v1/cluster/history
// answer. It is exposed for the tests.
function renderCharts(h) {
  const nodes = h.nodes.filter((n) => n.error === null);
  let t0 = Infinity, t1 = -Infinity, intervalMs = 5000;
  for (const n of nodes) {
    if (n.interval_ms > 0) intervalMs = n.interval_ms;
    if (n.samples.length) {
      t0 = Math.min(t0, n.samples[0].time_ms);
      t1 = Math.max(t1, n.samples[n.samples.length - 1].time_ms);
    }
  }
  const unanswered = h.nodes.filter((n) => n.error !== null).map((n) => "node " + n.node_id);
  $("charts-info").textContent = (t1 > t0 ? `the last ${Math.round((t1 - t0) / 60000 * 10) / 10} min, a sample every ${intervalMs / 1000} s` : "waiting for samples") +
    (unanswered.length ? `; no history from ${unanswered.join(", ")}` : "");
  if (!(t1 > t0)) return;
  const marks = chartMarks(nodes, intervalMs);
  for (const def of chartDefs) {
    $(def.id).innerHTML = chartSVG(def, chartSeries(def, nodes, intervalMs), marks, t0, t1);
  }
  lastHistory = { nodes, marks, t0, t1 };
  if (typeof renderGroupTrend === "function") renderGroupTrend();
}

// lastHistory is the last answer drawn (its nodes that answered, marks
// and time span): the group page draws its partitions' trend from it.
let lastHistory = null;

const groupTrendDef = { id: "chart-group-partitions", title: "lag per partition (records)", unit: "count" };

// groupPartitionSeries are group's lag per partition over the history,
// one line per "topic/partition", from its coordinator's samples (two
// coordinators' merged by time when the group moved).
function groupPartitionSeries(nodes, group) {
  const byPart = new Map();
  for (const n of nodes) {
    for (const s of n.samples) {
      for (const p of s.group_partitions || []) {
        if (p.group !== group) continue;
        const name = p.topic + "/" + p.partition;
        if (!byPart.has(name)) byPart.set(name, []);
        byPart.get(name).push([s.time_ms, p.lag]);
      }
    }
  }
  const series = [];
  for (const [name, points] of byPart) {
    points.sort((a, b) => a[0] - b[0]);
    series.push({ name, points });
  }
  return series.sort(byLatest);
}

// lagTrend is a line's change over the last minute it covers: its last
// value less the one a minute before (or its first), null without two
// points.
function lagTrend(points) {
  if (points.length < 2) return null;
  const last = points[points.length - 1];
  let from = points[0];
  for (const p of points) if (p[0] <= last[0] - 60000) from = p;
  return last[1] - from[1];
}

let historyBusy = false;

async function pollHistory() {
  if (historyBusy) return;
  historyBusy = true;
  try {
    renderCharts(await api("GET", "/v1/cluster/history"));
  } catch (e) {
    $("charts-info").textContent = String(e.message || e);
  } finally {
    historyBusy = false;
  }
}
