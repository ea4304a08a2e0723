package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func init() { commands = append(commands, newVersionCmd) }

// version is the release this binary was built from, set at link time:
//
//	go build -ldflags "-X main.version=$(git describe --tags --always --dirty)"
//
// The Makefile does this. Empty in a plain `go build`, where
// describeVersion falls back to what the Go toolchain recorded.
var version string

// describeVersion returns the version to print: ldVersion when the build
// set one, else the module version `go install module@vX` records, else
// the VCS revision `go build` in a checkout records (with "-dirty" when
// the tree had changes), else "unknown". info may be nil (no build info).
func describeVersion(ldVersion string, info *debug.BuildInfo) string {
	if ldVersion != "" {
		return ldVersion
	}
	if info == nil {
		return "unknown"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "unknown"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified == "true" {
		rev += "-dirty"
	}
	return rev
}

// buildVersion is this binary's version (describeVersion of its own build).
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	return describeVersion(version, info)
}

// versionLine is what `corestream --version` and `corestream version` print.
func versionLine() string {
	return fmt.Sprintf("corestream %s (%s, %s/%s)", buildVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print the version of this binary (also: corestream --version)",
		Args:  argsRange(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			a := appFrom(cmd)
			out := struct {
				Version string `json:"version"`
				Go      string `json:"go"`
				OS      string `json:"os"`
				Arch    string `json:"arch"`
			}{buildVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH}
			return a.emit(out, func(w io.Writer) { fmt.Fprintln(w, versionLine()) })
		},
	}
}
