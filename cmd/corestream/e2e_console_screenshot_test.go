package main

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The console's charts as the browser painted them: a screenshot of a
// chart, decoded, is checked for the colours the page drew with, so the
// test holds what a person sees and not only the DOM's data.

// chartColorsRGB are the first node colours of charts.js (chartColors):
// node 1, 2 and 3's lines; the node-down mark is node 2's red.
var chartColorsRGB = []color.RGBA{{0x09, 0x69, 0xda, 0xff}, {0xcf, 0x22, 0x2e, 0xff}, {0x1a, 0x7f, 0x37, 0xff}}

// chartShot is a screenshot of chart's SVG, decoded, with its scale
// (image pixels per CSS pixel). CORESTREAM_CONSOLE_SCREENSHOT=file.png
// also writes it beside file as file-<name>.png.
func chartShot(t *testing.T, bctx context.Context, chart, name string) (image.Image, float64) {
	t.Helper()
	sel := "#" + chart + " svg"
	buf, err := chromedp.Run(bctx, chromedp.Screenshot(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("screenshot of %s: %v", chart, err)
	}
	img, err := png.Decode(bytes.NewReader(buf))
	if err != nil {
		t.Fatalf("screenshot of %s: %v", chart, err)
	}
	if path := os.Getenv("CORESTREAM_CONSOLE_SCREENSHOT"); path != "" {
		if err := os.WriteFile(strings.TrimSuffix(path, ".png")+"-"+name+".png", buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	width := evalIn[float64](t, bctx, fmt.Sprintf(`document.querySelector(%q).getBoundingClientRect().width`, sel))
	if width <= 0 || img.Bounds().Dx() == 0 {
		t.Fatalf("screenshot of %s: %d px for an element %.0f px wide", chart, img.Bounds().Dx(), width)
	}
	return img, float64(img.Bounds().Dx()) / width
}

// near is whether c is within a few levels of want on every channel
// (anti-aliasing blends a line's edges; its middle keeps the colour).
func near(c color.Color, want color.RGBA) bool {
	r, g, b, _ := c.RGBA()
	d := func(a uint32, w uint8) bool { x := int(a>>8) - int(w); return x > -24 && x < 24 }
	return d(r, want.R) && d(g, want.G) && d(b, want.B)
}

// colourPixels counts img's pixels near want in the columns [x0, x1).
func colourPixels(img image.Image, want color.RGBA, x0, x1 int) int {
	b := img.Bounds()
	n := 0
	for x := max(x0, b.Min.X); x < min(x1, b.Max.X); x++ {
		for y := b.Min.Y; y < b.Max.Y; y++ {
			if near(img.At(x, y), want) {
				n++
			}
		}
	}
	return n
}

// checkChartPainted: the chart's screenshot holds each node's line in
// its colour (nodes counts them from 1).
func checkChartPainted(t *testing.T, bctx context.Context, chart string, nodes int) {
	t.Helper()
	img, scale := chartShot(t, bctx, chart, chart)
	plot := int(float64(chartPadLeftPx) * scale) // right of the y axis' labels
	for i := range nodes {
		if n := colourPixels(img, chartColorsRGB[i], plot, img.Bounds().Max.X); n < 20 {
			t.Errorf("the screenshot of %s has %d pixels of node %d's colour %v: its line is not painted", chart, n, i+1, chartColorsRGB[i])
		}
	}
}

// chartPadLeftPx is charts.js' left padding (the y axis' labels).
const chartPadLeftPx = 70

// markPaintedJS is the x of the chart's first mark of a kind, in CSS
// pixels from its SVG's left edge, and the plot's height (-1: no mark).
const markPaintedJS = `(() => {
	const m = document.querySelector('#%s line.mark[data-kind="%s"]');
	if (!m) return [-1, 0];
	const r = m.getBoundingClientRect(), s = m.ownerSVGElement.getBoundingClientRect();
	return [r.left - s.left + r.width / 2, r.height];
})()`

// checkMarkPainted: the chart's screenshot has the mark of kind as a
// dashed vertical line in the column where the DOM places it: at least
// a third of its height is the mark's colour there (a node's line
// crosses a column in a few pixels).
func checkMarkPainted(t *testing.T, bctx context.Context, chart, kind string, want color.RGBA) {
	t.Helper()
	at := evalIn[[]float64](t, bctx, fmt.Sprintf(markPaintedJS, chart, kind))
	if at[0] < 0 {
		t.Fatalf("no %s mark on %s", kind, chart)
	}
	img, scale := chartShot(t, bctx, chart, chart+"-"+kind)
	x := int(at[0] * scale)
	n := colourPixels(img, want, x-1, x+2)
	if float64(n) < at[1]*scale/3 {
		t.Errorf("the screenshot of %s has %d pixels of the %s mark's colour around x=%d (a mark %.0f px high): the mark is not painted", chart, n, kind, x, at[1])
	}
}
