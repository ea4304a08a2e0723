// Package rafttest holds raftlite's test machinery: a data-driven script
// runner with golden output, an interaction environment that drives a few
// Nodes by hand, and a deterministic simulator that drives groups through
// adversarial schedules and checks Raft's safety properties at every step.
// Test code only; it does no I/O except reading and rewriting test scripts.
package rafttest

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// rewrite makes RunScript regenerate the expected output of every script it
// runs instead of comparing against it.
var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of data-driven scripts")

// Cmd is one command of a script: a line "name arg key=value ...".
type Cmd struct {
	// Pos is "file:line" for messages.
	Pos  string
	Name string
	// Args are the positional arguments, KV the key=value ones.
	Args []string
	KV   map[string]string
	// Line is the command as written.
	Line string
}

// Int returns key's value as an int, or def when absent.
func (c *Cmd) Int(key string, def int) int {
	v, ok := c.KV[key]
	if !ok {
		return def
	}
	i, err := strconv.Atoi(v)
	if err != nil {
		panic(fmt.Sprintf("%s: %s=%q is not an integer", c.Pos, key, v))
	}
	return i
}

// Str returns key's value, or def when absent.
func (c *Cmd) Str(key, def string) string {
	if v, ok := c.KV[key]; ok {
		return v
	}
	return def
}

// ArgInt returns positional argument i as an int.
func (c *Cmd) ArgInt(i int) int {
	if i >= len(c.Args) {
		panic(fmt.Sprintf("%s: %s needs argument %d", c.Pos, c.Name, i+1))
	}
	v, err := strconv.Atoi(c.Args[i])
	if err != nil {
		panic(fmt.Sprintf("%s: argument %q is not an integer", c.Pos, c.Args[i]))
	}
	return v
}

// block is a piece of a script: verbatim text (comments, blank lines) or a
// command with its expected output.
type block struct {
	text     string // verbatim lines, when cmd is nil
	cmd      *Cmd
	expected string
}

const separator = "----"

// parseScript splits a script into blocks. A command is one line, followed
// by "----" and the expected output, which ends at the first blank line.
func parseScript(name, src string) ([]block, error) {
	lines := strings.Split(src, "\n")
	var blocks []block
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			if i == len(lines)-1 && line == "" {
				break // the final newline
			}
			blocks = append(blocks, block{text: line})
			continue
		}
		cmd := parseCmd(fmt.Sprintf("%s:%d", name, i+1), trimmed)
		if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != separator {
			return nil, fmt.Errorf("%s: command without %q line after it", cmd.Pos, separator)
		}
		i += 2
		var out []string
		for ; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			out = append(out, lines[i])
		}
		blocks = append(blocks, block{cmd: cmd, expected: strings.Join(out, "\n")})
		if i < len(lines) && !(i == len(lines)-1 && lines[i] == "") {
			blocks = append(blocks, block{text: lines[i]})
		}
	}
	return blocks, nil
}

func parseCmd(pos, line string) *Cmd {
	fields := strings.Fields(line)
	c := &Cmd{Pos: pos, Name: fields[0], KV: map[string]string{}, Line: line}
	for _, f := range fields[1:] {
		if k, v, ok := strings.Cut(f, "="); ok {
			c.KV[k] = v
		} else {
			c.Args = append(c.Args, f)
		}
	}
	return c
}

// RunScript runs the script at path, calling handle for every command and
// comparing what it returns with the expected output. With -rewrite it
// writes the actual output back into the file instead. Output lines must
// not be blank (a blank line ends an output); handle returns "ok" for
// commands that print nothing.
func RunScript(t *testing.T, path string, handle func(*Cmd) string) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := parseScript(path, string(src))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	failed := false
	for _, b := range blocks {
		if b.cmd == nil {
			out.WriteString(b.text + "\n")
			continue
		}
		got := strings.TrimRight(handle(b.cmd), "\n")
		if got == "" {
			got = "ok"
		}
		for _, l := range strings.Split(got, "\n") {
			if strings.TrimSpace(l) == "" {
				t.Fatalf("%s: output of %q has a blank line", b.cmd.Pos, b.cmd.Line)
			}
		}
		out.WriteString(b.cmd.Line + "\n" + separator + "\n" + got + "\n")
		if !*rewrite && got != b.expected && !failed {
			failed = true
			t.Errorf("%s: %s\nexpected:\n%s\ngot:\n%s", b.cmd.Pos, b.cmd.Line, b.expected, got)
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
