package layering

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/corestream/corestream/"

// TestNoImportRunsUp parses the imports of every Go file of the module and
// fails on any that runs up a floor or across to a sibling folder on the
// same floor, naming the file and the rule.
func TestNoImportRunsUp(t *testing.T) {
	root := moduleRoot(t)
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			// Nested modules (bench/peer) and hidden or generated
			// folders are not part of this module's tree.
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if rel != "." {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		files++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		from := filepath.ToSlash(filepath.Dir(rel))
		isTest := strings.HasSuffix(path, "_test.go")
		// Every part under cluster/ has a floor, whether or not it
		// imports anything of the module yet.
		if p := part(from); top(from) == "cluster" && from != "cluster" {
			if _, ok := ClusterFloors[p]; !ok {
				t.Errorf("%s: the part %s has no floor in layering.ClusterFloors", rel, p)
			}
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			to, ok := strings.CutPrefix(p, module)
			if !ok {
				continue
			}
			if why := violation(from, to, isTest); why != "" {
				t.Errorf("%s imports %s: %s", rel, to, why)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("only %d Go files found under %s: the walk is broken", files, root)
	}
	for _, e := range Exceptions {
		if !usedExceptions[e.From+" -> "+e.To] {
			t.Errorf("exception %s -> %s is needed by no file any more: remove it from layering.Exceptions", e.From, e.To)
		}
	}
}

// violation says why package folder from may not import to, or "".
func violation(from, to string, isTest bool) string {
	why := floorViolation(from, to)
	if why == "" {
		why = clusterViolation(from, to)
	}
	if why == "" {
		return ""
	}
	for _, e := range Exceptions {
		if under(from, e.From) && under(to, e.To) {
			usedExceptions[e.From+" -> "+e.To] = true
			return ""
		}
	}
	if isTest {
		for _, e := range TestExceptions {
			if under(from, e.From) && under(to, e.To) {
				return ""
			}
		}
	}
	return why
}

// usedExceptions notes the Exceptions some import needed.
var usedExceptions = map[string]bool{}

// floorViolation applies the top-level floors.
func floorViolation(from, to string) string {
	ff, fok := floorOf(from)
	tf, tok := floorOf(to)
	switch {
	case !fok:
		return "the importing folder " + top(from) + " has no floor in layering.Floors"
	case !tok:
		return "the imported folder " + top(to) + " has no floor in layering.Floors"
	case top(from) == top(to):
		return ""
	case tf < ff:
		return ""
	case tf == ff:
		return "it is a sibling on floor " + strconv.Itoa(ff) + "; floors share code only downward"
	}
	return "floor " + strconv.Itoa(tf) + " (" + top(to) + ") is above floor " + strconv.Itoa(ff) + " (" + top(from) + ")"
}

// clusterViolation applies the floors inside cluster/ and the rule that
// the lowest of them import no protocol.
func clusterViolation(from, to string) string {
	if top(from) != "cluster" {
		return ""
	}
	fp, tp := part(from), part(to)
	ff, fok := ClusterFloors[fp]
	if !fok {
		return "the importing part " + fp + " has no floor in layering.ClusterFloors"
	}
	if under(to, "netio/wire") && !under(to, "netio/wire/scram") && ff <= ProtocolFree {
		return fp + " is on cluster floor " + strconv.Itoa(ff) + ", which speaks no protocol (layering.ProtocolFree)"
	}
	if top(to) != "cluster" || fp == tp {
		return ""
	}
	if fp != ComposedBy && slices.Contains(FrontEnds, tp) && !slices.Contains(FrontEnds, fp) {
		return tp + " is a front end; only the composition root (" + ComposedBy + ") imports a front end"
	}
	tf, tok := ClusterFloors[tp]
	switch {
	case !tok:
		return "the imported part " + tp + " has no floor in layering.ClusterFloors"
	case tf < ff:
		return ""
	case tf == ff:
		return tp + " is a sibling of " + fp + " on cluster floor " + strconv.Itoa(ff) + "; parts share code only downward (no front end imports another)"
	}
	return "cluster floor " + strconv.Itoa(tf) + " (" + tp + ") is above cluster floor " + strconv.Itoa(ff) + " (" + fp + ")"
}

// part is the part folder of a package under cluster/: cluster/X.
func part(pkg string) string {
	parts := strings.SplitN(pkg, "/", 3)
	if len(parts) < 2 {
		return pkg
	}
	return parts[0] + "/" + parts[1]
}

func top(pkg string) string { first, _, _ := strings.Cut(pkg, "/"); return first }

func floorOf(pkg string) (int, bool) { f, ok := Floors[top(pkg)]; return f, ok }

func under(pkg, prefix string) bool { return pkg == prefix || strings.HasPrefix(pkg, prefix+"/") }

// The rules themselves, on cases each way.
func TestViolation(t *testing.T) {
	for _, c := range []struct {
		from, to string
		test     bool
		ok       bool
	}{
		{"cluster/node", "shard/partition", false, true},
		{"segment", "segment/vfs", false, true},
		{"segment", "netio/uring", false, false},
		{"segment", "netio/uring", true, true},
		{"segment", "raftlite", false, false},
		{"shard/partition", "netio/wire", false, false},
		{"shard/partition", "netio/wire", true, false},
		{"netio/uring", "segment/vfs", false, true},
		{"client", "cluster/node", false, false},
		{"cluster/node", "client", false, false},
		{"cluster/node", "client", true, true},
		{"bench", "tools/localcluster", false, false},
		{"cmd/corestream", "bench", false, true},
		{"newfolder", "segment", false, false},
		// Inside cluster/: parts only downward, front ends never sideways.
		{"cluster/httpapi", "cluster/native", false, false},
		{"cluster/httpapi", "cluster/native", true, false},
		{"cluster/kafka", "cluster/httpapi", false, false},
		{"cluster/native", "cluster/service", false, true},
		{"cluster/native", "cluster/service/wirecode", false, true},
		{"cluster/service/wirecode", "cluster/service", false, true},
		{"cluster/service", "cluster/native", false, false},
		{"cluster/routes", "cluster/node", false, false},
		{"cluster/node", "cluster/routes", false, true},
		{"cluster/metadata", "cluster/service", false, false},
		{"cluster/placement", "cluster/metadata", false, false},
		{"cluster/metadata", "cluster/placement", false, true},
		{"cluster/newpart", "cluster/clock", false, false},
		// The parts: the transport feeds the routes, never the other
		// way; no part imports a front end or the node; the node
		// imports them all.
		{"cluster/transport", "cluster/routes", false, true},
		{"cluster/transport", "cluster/peerwire", false, true},
		{"cluster/transport", "cluster/service", false, true},
		{"cluster/transport", "cluster/metadata", false, true},
		{"cluster/routes", "cluster/transport", false, false},
		{"cluster/transport", "cluster/node", false, false},
		{"cluster/transport", "cluster/node", true, false},
		{"cluster/transport", "cluster/kafka", false, false},
		{"cluster/transport", "cluster/native", false, false},
		{"cluster/routes", "cluster/httpapi", false, false},
		{"cluster/routes", "cluster/httpapi", true, false},
		{"cluster/node", "cluster/transport", false, true},
		{"cluster/controller", "cluster/routes", false, true},
		{"cluster/controller", "cluster/service", false, true},
		{"cluster/controller", "cluster/balance", false, true},
		{"cluster/controller", "cluster/transport", false, false},
		{"cluster/transport", "cluster/controller", false, false},
		{"cluster/controller", "cluster/node", false, false},
		{"cluster/controller", "cluster/httpapi", false, false},
		{"cluster/controller", "cluster/kafka", true, false},
		{"cluster/routes", "cluster/controller", false, false},
		{"cluster/node", "cluster/controller", false, true},
		{"cluster/node", "cluster/kafka", false, true},
		{"cluster/native", "cluster/kafka", false, false},
		{"cluster/node", "cluster/newpart", false, false},
		// The protocol-free floors; the SCRAM algorithm is no protocol.
		{"cluster/peerwire", "netio/wire", false, false},
		{"cluster/security", "netio/wire/scram", false, true},
		{"cluster/service", "netio/wire", false, true},
		// A named exception lets its one import through, and no other.
		{"cluster/metadata", "netio/wire", false, true},
		{"cluster/placement", "netio/wire", false, false},
	} {
		if got := violation(c.from, c.to, c.test) == ""; got != c.ok {
			t.Errorf("%s -> %s (test %v): allowed %v, want %v", c.from, c.to, c.test, got, c.ok)
		}
	}
}

func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module "+strings.TrimSuffix(module, "/")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod of the module above the test's directory")
		}
		dir = parent
	}
}
