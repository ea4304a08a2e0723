package wire

import "testing"

// The hot paths: produce and fetch requests on the broker, produce and
// fetch responses on the client. Each is measured next to a baseline taken
// in the same run: copying the same number of bytes with append, which is
// the least any encoder of the frame must do. Report ratios, not ns/op.

func benchProduce() *ProduceRequest {
	return &ProduceRequest{PartitionRef: sampleRef, TimeoutMs: 30000, Records: sampleBatch}
}

func benchFetch() *FetchRequest {
	return &FetchRequest{PartitionRef: sampleRef, FetchOffset: 1 << 30, MaxBytes: 1 << 20, MinBytes: 1, MaxWaitMs: 500}
}

// BenchmarkBaselineCopyProduceFrame appends the bytes of a produce frame
// (1 KiB batch) to a reused buffer: the floor for encoding one.
func BenchmarkBaselineCopyProduceFrame(b *testing.B) {
	frame := AppendRequest(nil, 1, 0, benchProduce())
	dst := make([]byte, 0, 4096)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		dst = append(dst[:0], frame...)
	}
}

func BenchmarkProduceRequestEncode(b *testing.B) {
	req := benchProduce()
	dst := make([]byte, 0, 4096)
	b.SetBytes(int64(len(AppendRequest(nil, 1, 0, req))))
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendRequest(dst[:0], 1, 0, req)
	}
}

// BenchmarkProduceRequestDecode is the broker's whole per-frame path:
// streaming reader, header, version check, body decode into a reused struct.
func BenchmarkProduceRequestDecode(b *testing.B) {
	frame := AppendRequest(nil, 1, 0, benchProduce())
	var req ProduceRequest
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if err := decodeRequestFrame(frame, &req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFetchRequestEncode(b *testing.B) {
	req := benchFetch()
	dst := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendRequest(dst[:0], 1, 0, req)
	}
}

func BenchmarkFetchRequestDecode(b *testing.B) {
	frame := AppendRequest(nil, 1, 0, benchFetch())
	var req FetchRequest
	b.ReportAllocs()
	for b.Loop() {
		if err := decodeRequestFrame(frame, &req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBaselineCopyFetchHeader copies 30 bytes: the floor for writing
// the fixed part of a fetch response.
func BenchmarkBaselineCopyFetchHeader(b *testing.B) {
	hdr := AppendFetchResponseHeader(nil, 1, 0, 1000, 10, NodeNone, 1<<20)
	dst := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		dst = append(dst[:0], hdr...)
	}
}

func BenchmarkFetchResponseHeader(b *testing.B) {
	dst := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendFetchResponseHeader(dst[:0], 1, 0, 1000, 10, NodeNone, 1<<20)
	}
}

func BenchmarkFetchResponseDecode(b *testing.B) {
	frame := AppendResponse(nil, 1, 0, &FetchResponse{HighWatermark: 1000, LogStartOffset: 10, Records: sampleBatch})
	var resp FetchResponse
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if err := decodeResponseFrame(frame, &resp); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkProduceResponseEncode(b *testing.B) {
	resp := &ProduceResponse{BaseOffset: 1 << 30, LogAppendTimeMs: -1}
	dst := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendResponse(dst[:0], 1, 0, resp)
	}
}

func BenchmarkProduceResponseDecode(b *testing.B) {
	frame := AppendResponse(nil, 1, 0, &ProduceResponse{BaseOffset: 1 << 30, LogAppendTimeMs: -1})
	var resp ProduceResponse
	b.ReportAllocs()
	for b.Loop() {
		if err := decodeResponseFrame(frame, &resp); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNextRequestFrame splits a buffer of 64 pipelined fetch requests.
func BenchmarkNextRequestFrame(b *testing.B) {
	var stream []byte
	for i := range 64 {
		stream = AppendRequest(stream, uint32(i), 0, benchFetch())
	}
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		for rest := stream; len(rest) > 0; {
			_, n, err := NextRequestFrame(rest, 0)
			if err != nil || n == 0 {
				b.Fatal(err)
			}
			rest = rest[n:]
		}
	}
}

func decodeRequestFrame(buf []byte, req Request) error {
	frame, _, err := NextRequestFrame(buf, 0)
	if err != nil {
		return err
	}
	h, body, err := ParseRequestHeader(frame)
	if err != nil {
		return err
	}
	if err := h.Check(); err != nil {
		return err
	}
	return req.DecodeBody(body, h.APIVersion)
}

func decodeResponseFrame(buf []byte, resp Response) error {
	frame, _, err := NextResponseFrame(buf, 0)
	if err != nil {
		return err
	}
	h, body, err := ParseResponseHeader(frame)
	if err != nil {
		return err
	}
	return DecodeResponseBody(h, body, 0, resp)
}

// TestHotPathsDoNotAllocate pins the zero-allocation promise of the
// produce and fetch paths (with a caller-supplied buffer and struct).
func TestHotPathsDoNotAllocate(t *testing.T) {
	produceFrame := AppendRequest(nil, 1, 0, benchProduce())
	fetchFrame := AppendRequest(nil, 1, 0, benchFetch())
	fetchResp := AppendResponse(nil, 1, 0, &FetchResponse{HighWatermark: 1, Records: sampleBatch})
	produceResp := AppendResponse(nil, 1, 0, &ProduceResponse{BaseOffset: 1})
	var pr ProduceRequest
	var fr FetchRequest
	var fresp FetchResponse
	var presp ProduceResponse
	dst := make([]byte, 0, 4096)
	_ = decodeRequestFrame(produceFrame, &pr) // first decode sets the topic string
	_ = decodeRequestFrame(fetchFrame, &fr)
	paths := map[string]func(){
		"produce request encode":  func() { dst = AppendRequest(dst[:0], 1, 0, benchProduceStatic) },
		"produce request decode":  func() { must(t, decodeRequestFrame(produceFrame, &pr)) },
		"fetch request encode":    func() { dst = AppendRequest(dst[:0], 1, 0, benchFetchStatic) },
		"fetch request decode":    func() { must(t, decodeRequestFrame(fetchFrame, &fr)) },
		"fetch response header":   func() { dst = AppendFetchResponseHeader(dst[:0], 1, 0, 5, 0, NodeNone, 100) },
		"fetch response decode":   func() { must(t, decodeResponseFrame(fetchResp, &fresp)) },
		"produce response encode": func() { dst = AppendResponse(dst[:0], 1, 0, &presp) },
		"produce response decode": func() { must(t, decodeResponseFrame(produceResp, &presp)) },
		"next request frame":      func() { _, _, _ = NextRequestFrame(fetchFrame, 0) },
	}
	for name, fn := range paths {
		if n := testing.AllocsPerRun(100, fn); n != 0 {
			t.Errorf("%s: %v allocations per call", name, n)
		}
	}
}

var (
	benchProduceStatic = benchProduce()
	benchFetchStatic   = benchFetch()
)

func must(t *testing.T, err error) {
	if err != nil {
		t.Fatal(err)
	}
}
