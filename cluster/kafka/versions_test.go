package kafka

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// docs/kafka.md's table lists exactly what ApiVersions does.
func TestDocumentedVersions(t *testing.T) {
	doc, err := os.ReadFile("../../docs/kafka.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile(`(?m)^\| (\w+) \| (\d+) \| (\d+)–(\d+) \|$`).FindAllStringSubmatch(string(doc), -1)
	documented := map[string]bool{}
	for _, r := range rows {
		documented[strings.ToLower(fmt.Sprintf("%s %s %s-%s", r[1], r[2], r[3], r[4]))] = true
	}
	for _, s := range supported {
		// kmsg spells InitProducerId "InitProducerID".
		row := strings.ToLower(fmt.Sprintf("%s %d %d-%d", kmsg.NameForKey(s.key), s.key, s.min, s.max))
		if !documented[row] {
			t.Errorf("docs/kafka.md lacks the row for %s", row)
		}
		delete(documented, row)
	}
	for row := range documented {
		t.Errorf("docs/kafka.md lists %s, which ApiVersions does not", row)
	}
}

// Every API listed has a handler, with the versions kmsg can decode.
func TestSupportedHaveHandlers(t *testing.T) {
	for _, s := range supported {
		req := kmsg.RequestForKey(s.key)
		if req == nil || s.max > req.MaxVersion() || s.min < 0 || s.min > s.max {
			t.Errorf("%s: versions %d..%d", kmsg.NameForKey(s.key), s.min, s.max)
		}
	}
	resp := apiVersionsResponse(0)
	if len(resp.ApiKeys) != len(supported) {
		t.Fatalf("ApiVersions lists %d APIs, supported %d", len(resp.ApiKeys), len(supported))
	}
}

// refusal says how this listener answers every version kmsg knows of an
// API it does not serve: UNSUPPORTED_VERSION where the response has a
// top-level error code at that version (errorResponse), else a closed
// connection; as the text of its docs/kafka.md row.
func refusal(key int16) string {
	closes := func(v int16) bool {
		req := kmsg.RequestForKey(key)
		req.SetVersion(v)
		return errorResponse(req, kerr.UnsupportedVersion.Code) == nil
	}
	answer := map[bool]string{true: "the connection is closed", false: "`UNSUPPORTED_VERSION`"}
	var parts []string
	max := kmsg.RequestForKey(key).MaxVersion()
	for from := int16(0); from <= max; {
		to := from
		for to < max && closes(to+1) == closes(from) {
			to++
		}
		vs := fmt.Sprintf("v%d–%d", from, to)
		if from == to {
			vs = fmt.Sprintf("v%d", from)
		}
		parts = append(parts, vs+": "+answer[closes(from)])
		from = to + 1
	}
	if len(parts) == 1 {
		return answer[closes(0)]
	}
	return strings.Join(parts, "; ")
}

// docs/kafka.md lists every API kmsg knows that ApiVersions does not,
// with how it is refused (refusal), and no other.
func TestDocumentedRefusals(t *testing.T) {
	doc, err := os.ReadFile("../../docs/kafka.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile(`(?m)^\| (\w+) \| (\d+) \| ((?:v\d|`+"`"+`|the connection).*) \|$`).FindAllStringSubmatch(string(doc), -1)
	documented := map[string]bool{}
	for _, r := range rows {
		documented[fmt.Sprintf("| %s | %s | %s |", r[1], r[2], r[3])] = true
	}
	for key := int16(0); key < 1000; key++ {
		if kmsg.RequestForKey(key) == nil {
			continue
		}
		if _, _, served := versionRange(key); served {
			continue
		}
		row := fmt.Sprintf("| %s | %d | %s |", kmsg.NameForKey(key), key, refusal(key))
		if !documented[row] {
			t.Errorf("docs/kafka.md lacks the row\n%s", row)
		}
		delete(documented, row)
	}
	for row := range documented {
		t.Errorf("docs/kafka.md lists %s, which is not how that API is refused", row)
	}
}
