package httpapi

import (
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/corestream/corestream/cluster/history"
	"github.com/corestream/corestream/netio/wire"
)

// Every wire code has an HTTP status, and the ones a caller acts on have
// the status the docs promise.
func TestHTTPStatusTable(t *testing.T) {
	for _, e := range wire.Errors() {
		if _, ok := httpStatusByCode[e.Code]; !ok {
			t.Errorf("wire code %d %s has no HTTP status in httpStatusByCode", e.Code, e.Name)
		}
	}
	if len(httpStatusByCode) != len(wire.Errors()) {
		t.Errorf("httpStatusByCode has %d entries, the wire table %d codes", len(httpStatusByCode), len(wire.Errors()))
	}
	want := []struct {
		err    *wire.Error
		status int
	}{
		{wire.ErrUnknownServerError, 500},
		{wire.ErrInvalidRequest, 400},
		{wire.ErrMessageTooLarge, 413},
		{wire.ErrUnknownTopicOrPartition, 404},
		{wire.ErrNotPrimary, 421},
		{wire.ErrNotMetadataPrimary, 421},
		{wire.ErrPrimaryNotAvailable, 503},
		{wire.ErrNotEnoughReplicas, 503},
		{wire.ErrRequestTimedOut, 504},
		{wire.ErrOffsetOutOfRange, 416},
		{wire.ErrTopicAlreadyExists, 409},
		{wire.ErrInvalidTopicName, 400},
		{wire.ErrInvalidPartitions, 400},
		{wire.ErrInvalidConfig, 400},
		{wire.ErrBusy, 429},
		{wire.ErrStorageError, 503},
	}
	for _, w := range want {
		if got := httpStatusOf(w.err); got != w.status {
			t.Errorf("%s: status %d, want %d", w.err.Name, got, w.status)
		}
	}
	for _, e := range wire.Errors() {
		s := httpStatusOf(e)
		if e.Retriable && s/100 == 4 && s != http.StatusMisdirectedRequest && s != http.StatusTooManyRequests && s != http.StatusNotFound {
			t.Errorf("%s is retriable but answered %d, a status that tells a caller not to retry", e.Name, s)
		}
	}
}

// Whatever the error, the answer has one shape; the status comes from the
// code except where HTTP decides it.
func TestHTTPErrorAnswers(t *testing.T) {
	addrs := func(id int32) string { return map[int32]string{2: "10.0.0.2:7072"}[id] }
	hinted := wire.Errorf(wire.ErrNotPrimary, "node 1 is not the primary")
	hinted.Hint = &wire.Hint{NodeID: 2, Address: "10.0.0.2:7070", Generation: 7}
	busyErr := wire.Errorf(wire.ErrBusy, "inbox full")
	busyErr.RetryAfterMs = 5
	cases := []struct {
		name   string
		err    error
		status int
		allow  string
		json   string
	}{
		{"with a hint", hinted, 421, "",
			`{"error":{"code":"NOT_PRIMARY","message":"node 1 is not the primary","retriable":true,"hint":{"node_id":2,"http_addr":"10.0.0.2:7072","generation":7}}}`},
		{"with retry advice", busyErr, 429, "",
			`{"error":{"code":"BUSY","message":"inbox full","retriable":true,"retry_after_ms":5}}`},
		{"no wire code", errors.New("boom"), 500, "",
			`{"error":{"code":"UNKNOWN_SERVER_ERROR","message":"boom","retriable":false}}`},
		{"a bare table entry", wire.ErrStorageError, 503, "",
			`{"error":{"code":"STORAGE_ERROR","message":` + mustJSON(wire.ErrStorageError.Description) + `,"retriable":true}}`},
		{"a code this build does not know", &wire.ErrorResponse{Err: wire.ErrorForCode(999).(*wire.Error), Message: "new"}, 500, "",
			`{"error":{"code":"UNKNOWN_CODE_999","message":"new","retriable":false}}`},
		{"HTTP's own status", &httpStatusError{status: 405, allow: "GET, HEAD", err: wire.Errorf(wire.ErrInvalidRequest, "no")}, 405, "GET, HEAD",
			`{"error":{"code":"INVALID_REQUEST","message":"no","retriable":false}}`},
	}
	for _, c := range cases {
		status, allow, body := errorAnswerOf(c.err, addrs)
		raw, _ := json.Marshal(body)
		if status != c.status || allow != c.allow || string(raw) != c.json {
			t.Errorf("%s: %d %q %s\nwant %d %q %s", c.name, status, allow, raw, c.status, c.allow, c.json)
		}
	}
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// httpAnswers lists one value of every type the HTTP API answers with or
// reads: TestHTTPAnswersAreSnakeCase walks them, and checks that the list
// holds every type marked as an answer in the source.
var httpAnswers = []any{
	errorAnswer{}, healthAnswer{}, clusterAnswer{}, topicList{}, topicSummary{}, topicDetail{}, deletedTopic{},
	produceAnswer{}, fetchAnswer{}, loginAnswer{}, userAnswer{}, userList{},
	partitionList{}, partitionsLogAnswer{}, rebalanceAnswer{}, movePrimaryAnswer{}, statsAnswer{}, clusterStatsAnswer{}, rosterAnswer{}, reassignAnswer{},
	historyAnswer{}, clusterHistoryAnswer{}, history.Sample{},
	// Request bodies follow the same rule.
	produceBody{}, createTopicBody{}, partitionsLogBody{}, rebalanceBody{}, movePrimaryBody{}, loginBody{}, createUserBody{}, userChangeBody{}, addNodeBody{}, drainBody{},
}

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// Every field of every JSON answer (and request body) has an explicit
// snake_case json tag: none falls back to its Go name.
func TestHTTPAnswersAreSnakeCase(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(path string, typ reflect.Type)
	walk = func(path string, typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Array || typ.Kind() == reflect.Map {
			if typ.Kind() == reflect.Map && typ.Key().Kind() != reflect.String {
				t.Errorf("%s: a map keyed by %s", path, typ.Key())
			}
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] {
			return
		}
		seen[typ] = true
		if typ.NumField() == 0 {
			t.Errorf("%s (%s) has no fields", path, typ)
		}
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case !f.IsExported():
				t.Errorf("%s.%s: unexported, so never in the JSON", path, f.Name)
			case f.Anonymous:
				t.Errorf("%s.%s: embedded; name its fields", path, f.Name)
			case !snakeCase.MatchString(name):
				t.Errorf("%s.%s: json tag %q is not snake_case", path, f.Name, f.Tag.Get("json"))
			}
			walk(path+"."+name, f.Type)
		}
	}
	listed := map[string]bool{}
	for _, v := range httpAnswers {
		typ := reflect.TypeOf(v)
		listed[typ.Name()] = true
		walk(typ.Name(), typ)
	}
	// Every type with the httpAnswer marker in the HTTP files is listed.
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no HTTP sources: %v", err)
	}
	marked := 0
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Name.Name != "httpAnswer" || fn.Recv == nil {
				continue
			}
			typ := fn.Recv.List[0].Type
			if st, ok := typ.(*ast.StarExpr); ok {
				typ = st.X
			}
			name := typ.(*ast.Ident).Name
			marked++
			if !listed[name] {
				t.Errorf("%s: %s answers HTTP requests but is not in httpAnswers", file, name)
			}
		}
	}
	if marked < 9 {
		t.Fatalf("found %d answer types in %v; the scan is broken", marked, files)
	}
}
