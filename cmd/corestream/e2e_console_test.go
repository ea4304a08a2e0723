package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The web console (docs/console.md) in a real headless browser: Debian's
// chromium, driven over the DevTools protocol. The test skips when no
// chromium is installed; CI installs it (.ci/run).

// consoleNode is a node row as the console shows it.
type consoleNode struct {
	Node      int32 `json:"node"`
	Alive     bool  `json:"alive"`
	Primaries int32 `json:"primaries"`
}

// consolePartition is a partition row as the console shows it.
type consolePartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Primary   int32  `json:"primary"`
	// HighWatermark is the cell's text ("–" when the primary gave no
	// log figures).
	HighWatermark string `json:"hw,omitempty"`
}

const (
	consoleNodesJS = `Array.from(document.querySelectorAll('#nodes tbody tr')).map(r =>
		({node: +r.dataset.node, alive: r.dataset.alive === 'true', primaries: +r.dataset.primaries}))`
	consolePartitionsJS = `Array.from(document.querySelectorAll('#partitions tbody tr[data-topic]')).map(r =>
		({topic: r.dataset.topic, partition: +r.dataset.partition, primary: +r.dataset.primary, hw: r.cells[9].textContent}))`
	// consoleSynthJS is a synthetic page of n partitions, as GET
	// /v1/partitions answers one.
	consoleSynthJS = `((n) => {
		const ps = new Array(n);
		for (let i = 0; i < n; i++) ps[i] = {topic: 'topic-' + (i >> 10), partition: i & 1023, primary_id: 1 + i %% 3, generation: 7,
			preferred_primary_id: 1 + i %% 3, replicas: [1, 2, 3], in_sync: [1, 2, 3], offline: [], state: 'online', error: null,
			log: {log_start_offset: 0, high_watermark: 123456, log_end_offset: 123456, size_bytes: 98765432}};
		return {total: n, offset: 0, limit: n, partitions: ps};
	})(%d)`
	// consoleRenderJS renders a synthetic page with the console's own
	// function and answers the ms it took, layout included.
	consoleRenderJS = `(() => {
		const page = ` + consoleSynthJS + `;
		const t0 = performance.now();
		corestreamConsole.renderPartitions(page);
		void document.body.offsetHeight;
		return performance.now() - t0;
	})()`
	// consoleScrollJS renders a synthetic page, scrolls to its end and
	// answers the last row drawn and the rows in the DOM, in one
	// evaluation, so that the page's own refresh cannot come between.
	consoleScrollJS = `(() => {
		corestreamConsole.renderPartitions(` + consoleSynthJS + `);
		const box = document.getElementById('partitions-scroll');
		box.scrollTop = box.scrollHeight;
		drawPartitionRows();
		const rows = document.querySelectorAll('#partitions tbody tr[data-topic]');
		const r = rows[rows.length - 1];
		return [{topic: r.dataset.topic, partition: +r.dataset.partition, primary: +r.dataset.primary}, {partition: rows.length}];
	})()`
)

// consoleHistoryMs is the browser test's http.history_interval_ms: the
// charts get a sample every half second instead of every 5 s.
const consoleHistoryMs = 500

// consoleSeries is a chart's line as the page drew it: its name and the
// values it plotted (data-values).
type consoleSeries struct {
	Chart  string    `json:"chart"`
	Name   string    `json:"name"`
	Values []float64 `json:"values"`
}

// consoleSeriesJS reads every chart's lines from the DOM.
const consoleSeriesJS = `Array.from(document.querySelectorAll('figure.chart polyline.series')).map(l => ({
	chart: l.closest('figure').id, name: l.dataset.name,
	values: l.dataset.values === '' ? [] : l.dataset.values.split(',').map(Number)}))`

// consoleMarksJS reads the kinds of the marks on the produce chart.
const consoleMarksJS = `Array.from(document.querySelectorAll('#chart-produce-bytes line.mark')).map(m => m.dataset.kind)`

// chartPeak is the largest value chart's line name plotted among its
// last n values (-1 when there is no such line).
func chartPeak(series []consoleSeries, chart, name string, n int) float64 {
	peak := -1.0
	for _, s := range series {
		if s.Chart != chart || s.Name != name {
			continue
		}
		peak = 0
		for _, v := range s.Values[max(0, len(s.Values)-n):] {
			peak = max(peak, v)
		}
	}
	return peak
}

// chromiumPath is the browser to drive, "" when none is installed.
func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Three nodes, a topic, records; the console shows the nodes and
// primaries `cluster status --json` gives, the topic's partitions with
// their primaries, starts a rebalance, and shows a killed node down
// within a few seconds. CORESTREAM_CONSOLE_SCREENSHOT=file.png saves a
// screenshot; CORESTREAM_CONSOLE_MEASURE=1 also measures the node's CPU
// with the console open (docs/console.md).
func TestConsoleInBrowser(t *testing.T) {
	browser := chromiumPath()
	if browser == "" {
		t.Skip("no chromium on PATH: install Debian's chromium (apt-get install chromium) to run the console's browser test")
	}
	c := startCluster(t, clusterOpts{nodes: 3, http: true, historyMs: consoleHistoryMs})
	const parts = 6
	c.cliOK("", "topic", "create", "orders", "--partitions", strconv.Itoa(parts), "--replication-factor", "3")
	var lines strings.Builder
	for i := range 300 {
		fmt.Fprintf(&lines, "k%d:v%d\n", i, i)
	}
	c.cliOK(lines.String(), "produce", "orders", "--key-separator", ":")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.WindowSize(1400, 1100))...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	page := "http://" + c.plan.Nodes[0].HTTPAddr + "/"
	if err := chromedp.Do(bctx, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#nodes tbody tr"))); err != nil {
		t.Fatalf("opening %s: %v", page, err)
	}

	// Nodes and primaries match the CLI's status (read until both agree:
	// the page refreshes every second).
	var shown []consoleNode
	var status string
	eventually(t, 30*time.Second, "the console's nodes to match cluster status --json", func() bool {
		status = c.cliOK("", "cluster", "status", "--json")
		var st struct {
			Nodes []struct {
				ID        int32 `json:"id"`
				Alive     bool  `json:"alive"`
				Primaries int32 `json:"primaries"`
			} `json:"nodes"`
		}
		if err := json.Unmarshal([]byte(status), &st); err != nil {
			t.Fatalf("cluster status --json: %v\n%s", err, status)
		}
		shown = evalIn[[]consoleNode](t, bctx, consoleNodesJS)
		if len(shown) != len(st.Nodes) {
			return false
		}
		for i, n := range st.Nodes {
			if shown[i] != (consoleNode{n.ID, n.Alive, n.Primaries}) || !n.Alive {
				return false
			}
		}
		return true
	})

	// The topic's partitions, each with its primary: as many per node as
	// the node's primaries (the only topic).
	var rows []consolePartition
	eventually(t, 15*time.Second, "the console's partitions to match the nodes' primaries", func() bool {
		rows = evalIn[[]consolePartition](t, bctx, consolePartitionsJS)
		per := map[int32]int32{}
		for _, r := range rows {
			if r.Topic == "orders" {
				per[r.Primary]++
			}
			if hw, err := strconv.Atoi(r.HighWatermark); err != nil || hw <= 0 {
				return false // every partition has records: each primary's log figures, through node 1
			}
		}
		shown = evalIn[[]consoleNode](t, bctx, consoleNodesJS)
		for _, n := range shown {
			if per[n.Node] != n.Primaries {
				return false
			}
		}
		return len(rows) == parts
	})

	// A primary moved from the page: the answer names the new primary.
	var from int32
	for _, r := range rows {
		if r.Topic == "orders" && r.Partition == 0 {
			from = r.Primary
		}
	}
	to := from%3 + 1
	if err := chromedp.Do(bctx, chromedp.SetValue(chromedp.CSS("#move-topic"), "orders"),
		chromedp.SetValue(chromedp.CSS("#move-partition"), "0"),
		chromedp.SetValue(chromedp.CSS("#move-node"), strconv.Itoa(int(to))),
		chromedp.Click(chromedp.CSS("#move-form button"))); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("orders/0: primary node %d,", to)
	eventually(t, 20*time.Second, "the move's answer on the page", func() bool {
		result := evalIn[string](t, bctx, `document.getElementById('move-result').textContent`)
		if strings.Contains(result, "_") { // an error code: the move failed
			t.Fatalf("moving orders/0 from node %d to %d: %s", from, to, result)
		}
		return strings.HasPrefix(result, want)
	})

	// A rebalance started from the page answers its plan.
	var result string
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS("#rebalance"))); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "the rebalance's answer on the page", func() bool {
		result = evalIn[string](t, bctx, `document.getElementById('rebalance-result').textContent`)
		return strings.HasPrefix(result, "started") || strings.HasPrefix(result, "planned")
	})
	t.Logf("rebalance from the page: %s", result)

	// The render cost of the partition view (docs/console.md).
	for _, n := range []int{1000, 10000} {
		ms := evalIn[float64](t, bctx, fmt.Sprintf(consoleRenderJS, n))
		t.Logf("rendering %d partitions: %.1f ms", n, ms)
	}
	// Scrolled to the end, the view draws the last rows of the 10,000.
	last := evalIn[[]consolePartition](t, bctx, fmt.Sprintf(consoleScrollJS, 10000))
	if len(last) != 2 || last[0] != (consolePartition{"topic-9", 9999 & 1023, 1 + 9999%3, ""}) || last[1].Partition > 200 {
		t.Errorf("scrolled to the end of 10,000 partitions, the view draws %+v", last)
	}
	// A shorter page after the long one is drawn from its top, wherever
	// the long one was scrolled to.
	eventually(t, 15*time.Second, "the topic's partitions drawn again", func() bool {
		return len(evalIn[[]consolePartition](t, bctx, consolePartitionsJS)) == parts
	})
	// Consumer groups and their lag, as the CLI gives them
	// (e2e_console_groups_test.go), before more records arrive.
	checkConsoleGroups(t, c, bctx, "orders", parts)
	// Live rates: with records flowing, the page shows produce and
	// fetch rates.
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			default:
			}
			c.cli(lines.String(), "produce", "orders", "--key-separator", ":")
			c.cli("", "consume", "orders", "--count", "300")
		}
	}()
	eventually(t, 20*time.Second, "produce and fetch rates on the page", func() bool {
		rates := evalIn[[]string](t, bctx, `Array.from(document.querySelectorAll('#nodes tbody tr')).map(r => r.cells[7].textContent + '|' + r.cells[9].textContent)`)
		produced, fetched := false, false
		for _, r := range rates {
			p, f, _ := strings.Cut(r, "|")
			produced = produced || (p != "0 B" && p != "–")
			fetched = fetched || (f != "0 B" && f != "–")
		}
		return produced && fetched
	})
	// The charts, drawn by the page from the nodes' samples, plot the
	// load: every node's produce and fetch bytes and records move (each
	// leads partitions of the topic), and the group's lag is charted.
	eventually(t, 30*time.Second, "the load on the charts", func() bool {
		series := evalIn[[]consoleSeries](t, bctx, consoleSeriesJS)
		for _, chart := range []string{"chart-produce-bytes", "chart-produce-records", "chart-fetch-bytes", "chart-fetch-records"} {
			for node := 1; node <= 3; node++ {
				if chartPeak(series, chart, fmt.Sprintf("node %d", node), 10) <= 0 {
					return false
				}
			}
		}
		// The topic's produce rate, over the cluster; the group's lag,
		// and per partition on its page (opened by checkConsoleGroups).
		if chartPeak(series, "chart-topic-records", "orders", 10) <= 0 {
			return false
		}
		for p := range parts {
			if chartPeak(series, "chart-group-partitions", fmt.Sprintf("orders/%d", p), 1000) < 0 {
				return false
			}
		}
		return chartPeak(series, "chart-group-lag", "console-app", 1000) >= 0 &&
			chartPeak(series, "chart-under-replicated", "offline", 1000) >= 0
	})
	// The group's partitions show their trend beside their lag (once
	// two samples hold them).
	var groupRows []consoleGroupPartition
	eventually(t, 20*time.Second, "each of the group's partitions with its lag's trend", func() bool {
		groupRows = evalIn[[]consoleGroupPartition](t, bctx, consoleGroupPartitionsJS)
		for _, p := range groupRows {
			if !strings.ContainsAny(p.Trend, "↑↓→") {
				return false
			}
		}
		return len(groupRows) == parts
	})
	t.Logf("the group's partitions with their trend: %+v", groupRows)
	// What the browser painted: each node's line in its colour.
	checkChartPainted(t, bctx, "chart-produce-bytes", 3)
	close(stop)
	<-stopped
	// And they fall back when it stops.
	eventually(t, 30*time.Second, "the charts quiet after the load", func() bool {
		series := evalIn[[]consoleSeries](t, bctx, consoleSeriesJS)
		for node := 1; node <= 3; node++ {
			if chartPeak(series, "chart-produce-bytes", fmt.Sprintf("node %d", node), 2) != 0 {
				return false
			}
		}
		return true
	})
	if path := os.Getenv("CORESTREAM_CONSOLE_SCREENSHOT"); path != "" {
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if os.Getenv("CORESTREAM_CONSOLE_MEASURE") != "" {
		measureConsoleCPU(t, c, bctx, page)
	}

	// A killed node is shown down within a few seconds.
	killed := time.Now()
	c.kill(3)
	eventually(t, 10*time.Second, "node 3 shown down", func() bool {
		shown = evalIn[[]consoleNode](t, bctx, consoleNodesJS)
		return len(shown) == 3 && !shown[2].Alive && shown[0].Alive
	})
	t.Logf("node 3 shown down %v after its kill", time.Since(killed).Round(10*time.Millisecond))
	// The charts mark it on their time axis, and say node 3 answers no
	// history.
	eventually(t, 20*time.Second, "node 3's fall marked on the charts", func() bool {
		return slices.Contains(evalIn[[]string](t, bctx, consoleMarksJS), "node-down") &&
			strings.Contains(evalIn[string](t, bctx, `document.getElementById('charts-info').textContent`), "no history from node 3")
	})
	// And the browser painted the mark where the DOM has it.
	checkMarkPainted(t, bctx, "chart-produce-bytes", "node-down", chartColorsRGB[1])
	if path := os.Getenv("CORESTREAM_CONSOLE_SCREENSHOT"); path != "" {
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(strings.TrimSuffix(path, ".png")+"-down.png", png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// And node 1 said so in its log, once, with the metadata generation;
	// it had logged the topic's creation the same way.
	eventually(t, 10*time.Second, "node 1's node down line", func() bool {
		return len(c.node(1).stderr.lines(`msg="node down"`, "node=3", "metadata_generation=")) == 1
	})
	if got := c.node(1).stderr.lines("level=INFO", `msg="topic created"`, "topic=orders", "metadata_generation="); len(got) != 1 {
		t.Errorf("node 1 logged the topic's creation %d times: %q", len(got), got)
	}
}

// measureConsoleCPU logs node 1's CPU over 10 s with no console open,
// then with one open, optionally after creating a topic of
// CORESTREAM_CONSOLE_MEASURE_PARTITIONS partitions (factor 1), so that
// the console's own cost shows against the node's idle one.
func measureConsoleCPU(t *testing.T, c *e2eCluster, bctx context.Context, page string) {
	t.Helper()
	if n, _ := strconv.Atoi(os.Getenv("CORESTREAM_CONSOLE_MEASURE_PARTITIONS")); n > 0 {
		start := time.Now()
		c.cliOK("", "topic", "create", "wide", "--partitions", strconv.Itoa(n), "--replication-factor", "1")
		t.Logf("created a topic of %d partitions in %v", n, time.Since(start).Round(time.Millisecond))
	}
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	idle := cpuShare(t, c.node(1), 10*time.Second)
	if err := chromedp.Do(bctx, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#nodes tbody tr"))); err != nil {
		t.Fatal(err)
	}
	open := cpuShare(t, c.node(1), 10*time.Second)
	t.Logf("node 1's CPU over 10 s: %.1f%% of a core with no console open, %.1f%% with one open", idle, open)
	// The requests of a refresh, as the page makes them (median of 5).
	for _, path := range []string{"/v1/cluster", "/v1/partitions?limit=100", "/v1/partitions?limit=1000"} {
		ms, err := chromedp.Run(bctx, chromedp.Evaluate[float64](`(async () => {
			const ts = [];
			for (let i = 0; i < 5; i++) {
				const t0 = performance.now();
				await (await fetch('`+path+`')).json();
				ts.push(performance.now() - t0);
			}
			return ts.sort((a, b) => a - b)[2];
		})()`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("GET %s from the page: %.1f ms", path, ms)
	}
}

// evalIn evaluates js in the page of ctx and decodes its value.
func evalIn[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("in the page: %v", err)
	}
	return v
}

// cpuShare is the share of a core s's process used over d, from
// /proc/PID/stat (utime and stime, in clock ticks of 10 ms).
func cpuShare(t *testing.T, s *server, d time.Duration) float64 {
	t.Helper()
	ticks := func() int64 {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		u, _ := strconv.ParseInt(f[11], 10, 64)
		k, _ := strconv.ParseInt(f[12], 10, 64)
		return u + k
	}
	before, start := ticks(), time.Now()
	time.Sleep(d) // the measurement's window, not a synchronisation
	return float64(ticks()-before) * 10 * float64(time.Millisecond) / float64(time.Since(start)) * 100
}

// A node with security.auth = scram: the console's data calls answer 401,
// so the page shows its login form; a wrong password is refused on the
// form, the bootstrap administrator's login shows the nodes, with the
// token in the tab's sessionStorage and nothing in localStorage; a user
// without the cluster permission sees a rebalance's refusal (403), and
// logging out brings the form back.
func TestConsoleLoginInBrowser(t *testing.T) {
	browser := chromiumPath()
	if browser == "" {
		t.Skip("no chromium on PATH: install Debian's chromium (apt-get install chromium) to run the console's browser test")
	}
	_, httpAddr := startSecuredNode(t)
	root := []string{"--user", "root", "--password", "rootpw", "user", "--http", httpAddr}
	// The administrator may not be created yet the instant the node
	// serves: wait for its first login to work.
	eventually(t, 20*time.Second, "the administrator created", func() bool {
		code, _, _ := runBin(t, "", append(root, "list")...)
		return code == 0
	})
	if code, out, errs := runBin(t, "", append(root, "create", "viewer", "--new-password", "viewerpw")...); code != 0 {
		t.Fatalf("creating user viewer: exit %d\n%s%s", code, out, errs)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox)...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	page := "http://" + httpAddr + "/"
	if err := chromedp.Do(bctx, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#login"))); err != nil {
		t.Fatalf("opening %s: the login form never showed: %v", page, err)
	}
	if why := evalIn[string](t, bctx, `document.getElementById('login-why').textContent`); !strings.Contains(why, "AUTHENTICATION_FAILED") {
		t.Errorf("the login form says %q; want the 401's reason", why)
	}
	logIn := func(user, password string) {
		t.Helper()
		if err := chromedp.Do(bctx, chromedp.SetValue(chromedp.CSS("#login-user"), user),
			chromedp.SetValue(chromedp.CSS("#login-password"), password),
			chromedp.Click(chromedp.CSS("#login-submit"))); err != nil {
			t.Fatal(err)
		}
	}
	logIn("root", "wrong")
	eventually(t, 15*time.Second, "the wrong password refused on the form", func() bool {
		return strings.Contains(evalIn[string](t, bctx, `document.getElementById('login-result').textContent`), "AUTHENTICATION_FAILED")
	})
	logIn("root", "rootpw")
	eventually(t, 20*time.Second, "the nodes shown after the login", func() bool {
		shown := evalIn[[]consoleNode](t, bctx, consoleNodesJS)
		return len(shown) == 1 && shown[0].Node == 1 && shown[0].Alive
	})
	if hidden := evalIn[bool](t, bctx, `document.getElementById('login').hidden`); !hidden {
		t.Error("the login form still shows after a login")
	}
	stored := evalIn[[]int](t, bctx, `[(sessionStorage.getItem('corestream.token') || '').length, localStorage.length]`)
	if stored[0] == 0 || stored[1] != 0 {
		t.Errorf("token length in sessionStorage %d, localStorage entries %d; want a token in the tab's session only", stored[0], stored[1])
	}

	// A user without the cluster permission: the rebalance's refusal
	// is shown, and logging out asks for a login again.
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS("#logout")), chromedp.WaitVisible(chromedp.CSS("#login"))); err != nil {
		t.Fatalf("logging out: %v", err)
	}
	if n := evalIn[int](t, bctx, `(sessionStorage.getItem('corestream.token') || '').length`); n != 0 {
		t.Errorf("the token is still in sessionStorage after logging out")
	}
	logIn("viewer", "viewerpw")
	eventually(t, 15*time.Second, "the login form gone", func() bool {
		return evalIn[bool](t, bctx, `document.getElementById('login').hidden`)
	})
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS("#rebalance"))); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "the rebalance's refusal on the page", func() bool {
		return strings.Contains(evalIn[string](t, bctx, `document.getElementById('rebalance-result').textContent`), "AUTHORIZATION_FAILED")
	})
}
