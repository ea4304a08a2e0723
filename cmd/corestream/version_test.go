package main

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime/debug"
	"strings"
	"testing"
)

func TestDescribeVersion(t *testing.T) {
	vcs := func(rev, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}}
	}
	for _, c := range []struct {
		name string
		ld   string
		info *debug.BuildInfo
		want string
	}{
		{"linker flag wins", "v1.2.0-3-gabc1234", vcs("0123456789abcdef0123", "false"), "v1.2.0-3-gabc1234"},
		{"go install module@version", "", &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, "v1.4.0"},
		{"checkout revision", "", vcs("0123456789abcdef0123", "false"), "0123456789ab"},
		{"checkout with changes", "", vcs("0123456789abcdef0123", "true"), "0123456789ab-dirty"},
		{"no vcs stamp", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "unknown"},
		{"no build info", "", nil, "unknown"},
	} {
		if got := describeVersion(c.ld, c.info); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// --version and the version command print the same line, need no
// cluster, and exit 0; the linker-set version is what they print.
func TestVersionCommand(t *testing.T) {
	old := version
	version = "v9.8.7-test"
	t.Cleanup(func() { version = old })
	runIt := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, strings.NewReader(""), &out, &errb, func(string) string { return "" })
		return code, out.String() + errb.String()
	}
	code, flag := runIt("--version")
	if code != exitOK || !strings.HasPrefix(flag, "corestream v9.8.7-test (go") {
		t.Fatalf("--version: exit %d, %q", code, flag)
	}
	if code, cmd := runIt("version"); code != exitOK || cmd != flag {
		t.Fatalf("version: exit %d, %q; want %q", code, cmd, flag)
	}
	code, out := runIt("--json", "version")
	var v struct{ Version string }
	if err := json.Unmarshal([]byte(out), &v); code != exitOK || err != nil || v.Version != "v9.8.7-test" {
		t.Fatalf("--json version: exit %d, %q (%v)", code, out, err)
	}
}
