package partition

import (
	"testing"
	"time"

	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/vfs"
)

// Long polls are bounded per partition: past fetchWaitersMax a fetch is
// answered at once with what is there, so idle consumers cannot pile up
// waiters without bound; the waiting ones are all answered by one commit.
func TestFetchWaitersBounded(t *testing.T) {
	e := newEnv(t, vfs.OS(), t.TempDir())
	r := e.open(segment.FsyncAlways)
	out := make(chan FetchResult, fetchWaitersMax+10)
	poll := func() {
		r.Fetch(&FetchArgs{Generation: GenerationUnknown, Offset: 0,
			MaxBytes: 1 << 10, MinBytes: 1, MaxWait: 30000 * time.Millisecond}, func(res FetchResult) { out <- res })
	}
	var waiting int
	e.do(func() {
		for i := 0; i < fetchWaitersMax; i++ {
			poll()
		}
		waiting = len(r.waiters)
	})
	if waiting != fetchWaitersMax || len(out) != 0 {
		t.Fatalf("%d waiters, %d answered early", waiting, len(out))
	}
	e.do(poll)
	select {
	case res := <-out:
		if res.Err != nil || res.Bytes != 0 {
			t.Fatalf("fetch past the bound: %+v", res)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a fetch past the bound waited")
	}
	if res := e.produce(r, mkBatch(t, 1, -1, 0, 0), acksQuorum); res.Err != nil {
		t.Fatal(res.Err)
	}
	deadline := time.After(10 * time.Second)
	for i := 0; i < fetchWaitersMax; i++ {
		select {
		case res := <-out:
			if res.Err != nil || res.Bytes == 0 {
				t.Fatalf("woken fetch %d: %+v", i, res)
			}
			segment.ReleaseSpans(res.Spans)
		case <-deadline:
			t.Fatalf("only %d of %d long polls woken by the commit", i, fetchWaitersMax)
		}
	}
	e.do(func() { waiting = len(r.waiters) })
	if waiting != 0 {
		t.Fatalf("%d waiters left after the commit", waiting)
	}
}

// AnswerFetches answers every parked long poll at once with what is there
// (a stopping node uses it so that consumers are not held until their
// connections are cut).
func TestAnswerFetchesEndsLongPolls(t *testing.T) {
	e := newEnv(t, vfs.OS(), t.TempDir())
	r := e.open(segment.FsyncAlways)
	if res := e.produce(r, mkBatch(t, 2, -1, 0, 0), acksQuorum); res.Err != nil {
		t.Fatal(res.Err)
	}
	out := make(chan FetchResult, 4)
	e.do(func() {
		// One poll past the end, one asking for more bytes than there are.
		r.Fetch(&FetchArgs{Generation: GenerationUnknown, Offset: 2,
			MaxBytes: 1 << 10, MinBytes: 1, MaxWait: 60000 * time.Millisecond}, func(res FetchResult) { out <- res })
		r.Fetch(&FetchArgs{Generation: GenerationUnknown, Offset: 0,
			MaxBytes: 1 << 20, MinBytes: 1 << 20, MaxWait: 60000 * time.Millisecond}, func(res FetchResult) { out <- res })
	})
	if len(out) != 0 {
		t.Fatal("a long poll was answered before its wait")
	}
	var waiting int
	e.do(func() {
		r.AnswerFetches()
		waiting = len(r.waiters)
	})
	if waiting != 0 || len(out) != 2 {
		t.Fatalf("%d waiters left, %d answered", waiting, len(out))
	}
	empty, some := <-out, <-out
	if empty.Err != nil || empty.Bytes != 0 || empty.HighWatermark != 2 {
		t.Fatalf("poll at the end: %+v", empty)
	}
	if some.Err != nil || some.Bytes == 0 {
		t.Fatalf("poll with data below min bytes: %+v", some)
	}
	segment.ReleaseSpans(some.Spans)
}

// Long polls whose wait passed do not count against fetchWaitersMax: a
// partition with nothing new, polled by a consumer of many partitions
// (one long poll each time any of them answers), sees thousands of polls
// time out between commits; the next one still waits and is woken by
// the next record, instead of being answered at once, empty, while the
// record waits for the consumer's next poll.
func TestFetchWaitersTimedOutDoNotCount(t *testing.T) {
	e := newEnv(t, vfs.OS(), t.TempDir())
	r := e.open(segment.FsyncAlways)
	short := make(chan FetchResult, fetchWaitersMax)
	e.do(func() {
		for i := 0; i < fetchWaitersMax; i++ {
			r.Fetch(&FetchArgs{Generation: GenerationUnknown, Offset: 0,
				MaxBytes: 1 << 10, MinBytes: 1, MaxWait: time.Millisecond}, func(res FetchResult) { short <- res })
		}
	})
	deadline := time.After(10 * time.Second)
	for i := 0; i < fetchWaitersMax; i++ {
		select {
		case res := <-short:
			if res.Err != nil || res.Bytes != 0 {
				t.Fatalf("timed-out poll %d: %+v", i, res)
			}
		case <-deadline:
			t.Fatalf("only %d of %d short polls timed out", i, fetchWaitersMax)
		}
	}
	out := make(chan FetchResult, 1)
	e.do(func() {
		r.Fetch(&FetchArgs{Generation: GenerationUnknown, Offset: 0,
			MaxBytes: 1 << 10, MinBytes: 1, MaxWait: 30000 * time.Millisecond}, func(res FetchResult) { out <- res })
	})
	select {
	case res := <-out:
		t.Fatalf("a long poll after %d timed-out ones was answered at once: %+v", fetchWaitersMax, res)
	default:
	}
	if res := e.produce(r, mkBatch(t, 1, -1, 0, 0), acksQuorum); res.Err != nil {
		t.Fatal(res.Err)
	}
	select {
	case res := <-out:
		if res.Err != nil || res.Bytes == 0 {
			t.Fatalf("woken fetch: %+v", res)
		}
		segment.ReleaseSpans(res.Spans)
	case <-time.After(10 * time.Second):
		t.Fatal("the long poll was not woken by the commit")
	}
}

// A long poll parked from inside another one's reply, while a commit
// wakes the waiters (the Kafka listener reads again past control
// batches), is kept and woken by the next commit, not dropped from the
// list to wait out its whole max wait.
func TestFetchParkedFromAReplyIsWoken(t *testing.T) {
	e := newEnv(t, vfs.OS(), t.TempDir())
	r := e.open(segment.FsyncAlways)
	out := make(chan FetchResult, 2)
	e.do(func() {
		r.Fetch(&FetchArgs{Generation: GenerationUnknown, Offset: 0, MaxBytes: 1 << 10, MinBytes: 1, MaxWait: 30000 * time.Millisecond},
			func(res FetchResult) {
				segment.ReleaseSpans(res.Spans)
				r.Fetch(&FetchArgs{Generation: GenerationUnknown, Offset: res.HighWatermark, MaxBytes: 1 << 10, MinBytes: 1,
					MaxWait: 30000 * time.Millisecond}, func(res FetchResult) { out <- res })
			})
	})
	if res := e.produce(r, mkBatch(t, 1, -1, 0, 0), acksQuorum); res.Err != nil {
		t.Fatal(res.Err)
	}
	select {
	case res := <-out:
		t.Fatalf("the second long poll was answered before its record: %+v", res)
	default:
	}
	if res := e.produce(r, mkBatch(t, 1, -1, 0, 0), acksQuorum); res.Err != nil {
		t.Fatal(res.Err)
	}
	select {
	case res := <-out:
		if res.Err != nil || res.Bytes == 0 {
			t.Fatalf("woken fetch: %+v", res)
		}
		segment.ReleaseSpans(res.Spans)
	case <-time.After(10 * time.Second):
		t.Fatal("the long poll parked from a reply was not woken by the next commit")
	}
}
