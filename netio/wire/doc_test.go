package wire

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated sections of docs/protocol.md")

const protocolDoc = "../../docs/protocol.md"

// generatedSections are the parts of docs/protocol.md rendered from the Go
// tables; each lies between <!-- BEGIN name --> and <!-- END name -->.
func generatedSections() map[string]string {
	return map[string]string{
		"ERROR TABLE": renderErrorTable(),
		"API TABLE":   renderAPITable(),
		"EXAMPLES":    renderExamples(),
	}
}

func renderErrorTable() string {
	var b strings.Builder
	b.WriteString("| code | name | retriable | meaning |\n| ---: | --- | :---: | --- |\n")
	b.WriteString("| 0 | NONE | | Success: the body is the API's response body. |\n")
	for _, e := range Errors() {
		r := "no"
		if e.Retriable {
			r = "yes"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s |\n", e.Code, e.Name, r, e.Description)
	}
	return b.String()
}

func renderAPITable() string {
	var b strings.Builder
	b.WriteString("| key | API | versions | purpose |\n| ---: | --- | :---: | --- |\n")
	for _, a := range APIs() {
		fmt.Fprintf(&b, "| %d | [%s](#%s) | %d..%d | %s |\n", a.Key, a.Name, strings.ToLower(a.Name), a.Min, a.Max, a.Summary)
	}
	return b.String()
}

func hexDump(b []byte) string {
	var s strings.Builder
	for i := 0; i < len(b); i += 16 {
		end := min(i+16, len(b))
		fmt.Fprintf(&s, "%04x ", i)
		for j := i; j < end; j++ {
			fmt.Fprintf(&s, " %02x", b[j])
		}
		s.WriteString("\n")
	}
	return s.String()
}

func renderExamples() string {
	var b strings.Builder
	fetch := &FetchRequest{PartitionRef: PartitionRef{Topic: "orders", TopicID: sampleTopicID, Partition: 3, Generation: 7},
		FetchOffset: 100, MaxBytes: 1 << 20, MinBytes: 1, MaxWaitMs: 500}
	b.WriteString("A Fetch v0 request, correlation id 5, for `orders` partition 3 (topic id " +
		sampleTopicID.String() + ", generation 7) from offset 100, max 1 MiB, min 1 byte, wait 500 ms:\n\n```\n")
	b.WriteString(hexDump(AppendRequest(nil, 5, 0, fetch)))
	b.WriteString("```\n\nThe NOT_PRIMARY answer naming node 2 at `10.0.0.2:7070`, generation 8:\n\n```\n")
	b.WriteString(hexDump(AppendErrorResponse(nil, 5, &ErrorResponse{Err: ErrNotPrimary,
		Message: "node 1 is not the primary of orders/3",
		Hint:    &Hint{NodeID: 2, Address: "10.0.0.2:7070", Generation: 8}})))
	b.WriteString("```\n")
	return b.String()
}

// TestProtocolDocInSync fails when docs/protocol.md's generated sections
// differ from the Go tables. Run `go test ./netio/wire -run ProtocolDoc
// -update` to rewrite them.
func TestProtocolDocInSync(t *testing.T) {
	path := filepath.FromSlash(protocolDoc)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	for name, want := range generatedSections() {
		begin, end := "<!-- BEGIN "+name+" -->\n", "<!-- END "+name+" -->"
		i := strings.Index(doc, begin)
		j := strings.Index(doc, end)
		if i < 0 || j < i {
			t.Fatalf("%s: markers %q and %q not found in order", path, begin, end)
		}
		got := doc[i+len(begin) : j]
		if got == want {
			continue
		}
		if *update {
			doc = doc[:i+len(begin)] + want + doc[j:]
			continue
		}
		t.Errorf("%s: section %s is stale; run: go test ./netio/wire -run ProtocolDoc -update", path, name)
	}
	if *update {
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Every API and every error name must be mentioned in the prose too.
	for _, a := range APIs() {
		if !strings.Contains(doc, "### "+a.Name) {
			t.Errorf("%s: no section \"### %s\"", path, a.Name)
		}
	}
}
