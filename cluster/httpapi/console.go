package httpapi

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"

	"github.com/corestream/corestream/netio/wire"
)

// The web console (docs/console.md): one page and its script and style,
// embedded in the binary so that nothing is fetched at run time. The
// page reads the same JSON routes a script would (GET /v1/cluster,
// /v1/cluster/stats, /v1/topics, /v1/partitions) and its actions are the
// API's own (POST /v1/topics, DELETE /v1/topics/{t}, POST /v1/rebalance,
// POST /v1/topics/{t}/partitions/{p}/primary): the console shows nothing
// a script cannot get, and has no permissions of its own.

//go:embed console
var consoleFiles embed.FS

// consoleFS is the console's files, rooted at the folder.
var consoleFS = func() fs.FS {
	sub, err := fs.Sub(consoleFiles, "console")
	if err != nil {
		panic(err) // the folder is embedded above; it cannot be missing
	}
	return sub
}()

// consoleCSP keeps the page to its own files: no script, style or
// connection goes anywhere but this node.
const consoleCSP = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"

// consolePage serves the console's page at "/".
func (h *API) consolePage(w http.ResponseWriter, r *http.Request) {
	page, err := fs.ReadFile(consoleFS, "index.html")
	if err != nil {
		h.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", consoleCSP)
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(page)
}

// consoleAssets serves the console's script and style under /console/;
// a folder is not listed (404 in the API's error shape).
func (h *API) consoleAssets() http.Handler {
	files := http.StripPrefix("/console/", http.FileServerFS(consoleFS))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") {
			h.fail(w, &httpStatusError{status: http.StatusNotFound,
				err: wire.Errorf(wire.ErrInvalidRequest, "no console asset %s; the console is at /", r.URL.Path)})
			return
		}
		w.Header().Set("Content-Security-Policy", consoleCSP)
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
