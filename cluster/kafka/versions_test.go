package kafka

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

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
