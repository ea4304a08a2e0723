package node

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The front ends (the native handler, cluster/native, the HTTP API,
// cluster/httpapi, and the Kafka listener, cluster/kafka) call the typed
// service and nothing under it: a front end that reached a replica, a
// segment or a file descriptor itself would drift from the others (HTTP
// used to re-encode wire frames and read segments with pread). Each
// forbidden import is listed with the files it is forbidden in.
func TestFrontEndsCallOnlyTheService(t *testing.T) {
	const mod = "github.com/corestream/corestream/"
	forbidden := []struct {
		pattern, imp, why string
	}{
		{"../native/[^e]*.go", mod + "shard/partition", "replicas are reached through the service (errors.go maps their kinds)"},
		{"../httpapi/*.go", mod + "shard/partition", "replicas are reached through the service"},
		{"../native/*.go", mod + "segment", "fetched records come as service.Records"},
		{"../httpapi/*.go", mod + "segment", "fetched records come as service.Records"},
		{"../native/*.go", mod + "cluster/node", "the native front end is given the service, not the node"},
		{"../httpapi/*.go", mod + "cluster/node", "the HTTP API is given the service, not the node"},
		{"../httpapi/*.go", mod + "netio", "HTTP does not build or read native frames"},
		{"../httpapi/*.go", "golang.org/x/sys/unix", "HTTP reads no files itself"},
		{"../native/*.go", "golang.org/x/sys/unix", "the native handler reads no files itself"},
		{"../kafka/[^e]*.go", mod + "shard/partition", "replicas are reached through the service (errors.go maps their kinds)"},
		{"../kafka/*.go", mod + "segment", "fetched records come as service.Records"},
		{"../kafka/*.go", mod + "cluster/node", "the Kafka listener is given the service, not the node"},
		{"../kafka/*.go", "golang.org/x/sys/unix", "the Kafka listener reads no files itself"},
	}
	checked := 0
	for _, f := range forbidden {
		files, err := filepath.Glob(f.pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			checked++
			af, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range af.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); p == f.imp {
					t.Errorf("%s imports %s: %s", path, p, f.why)
				}
			}
		}
	}
	if checked < 8 {
		t.Fatalf("only %d front-end files checked: the patterns are stale", checked)
	}
}
