package httpapi

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/segment/batch"
)

// Records over HTTP. Keys, values and header keys and values are bytes,
// and JSON strings are text, so both directions carry them as base64
// (RFC 4648 standard alphabet, padded): binary data survives. A produce
// may give text instead, as key_text / value_text (sent as its UTF-8
// bytes), for curl and scripts; a fetch answers base64 only, so that one
// shape serves every value. JSON null (or an absent field) is a null key
// or value, "" an empty one: the log keeps the difference and so does
// the API.

// Bounds of the records endpoints.
const (
	// httpRecordsMax bounds the records of one produce request (they make
	// one batch).
	httpRecordsMax = 10000
	// httpFetchBytesDefault is a fetch's max_bytes when the query has none.
	httpFetchBytesDefault = 1 << 20
)

// produceBody is the body of POST …/records.
type produceBody struct {
	Records []produceRecord `json:"records"`
}

// produceRecord is one record to append.
type produceRecord struct {
	Key       *string `json:"key"`
	KeyText   *string `json:"key_text"`
	Value     *string `json:"value"`
	ValueText *string `json:"value_text"`
	// Timestamp is in ms since the Unix epoch; absent = the time the
	// node received the request.
	Timestamp *int64         `json:"timestamp"`
	Headers   []recordHeader `json:"headers"`
}

// recordHeader is one record header, in both directions (a fetch fills
// Key and Value only). Header keys cannot be null.
type recordHeader struct {
	Key       *string `json:"key"`
	KeyText   *string `json:"key_text,omitempty"`
	Value     *string `json:"value"`
	ValueText *string `json:"value_text,omitempty"`
}

// produceAnswer answers a produce once the records are committed (or,
// with acks=primary, written by the primary).
type produceAnswer struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	BaseOffset  int64  `json:"base_offset"`
	LastOffset  int64  `json:"last_offset"`
	RecordCount int    `json:"record_count"`
	ServedBy    int32  `json:"served_by"`
}

// fetchAnswer answers a fetch. NextOffset is the offset to ask for next:
// past every batch returned (control batches and records below the
// requested offset included), or the requested offset when nothing was.
type fetchAnswer struct {
	Topic          string          `json:"topic"`
	Partition      int32           `json:"partition"`
	Records        []fetchedRecord `json:"records"`
	NextOffset     int64           `json:"next_offset"`
	HighWatermark  int64           `json:"high_watermark"`
	LogStartOffset int64           `json:"log_start_offset"`
	ServedBy       int32           `json:"served_by"`
}

// fetchedRecord is one committed record; every field is always present,
// offset 0 included, and key and value are null when the record's are.
type fetchedRecord struct {
	Offset    int64          `json:"offset"`
	Timestamp int64          `json:"timestamp"`
	Key       *string        `json:"key"`
	Value     *string        `json:"value"`
	Headers   []recordHeader `json:"headers"`
}

func (produceAnswer) httpAnswer() {}
func (fetchAnswer) httpAnswer()   {}

// produceParams are a produce's query parameters.
type produceParams struct{ acks service.Acks }

// parseProduceQuery reads ?acks=quorum|primary (default quorum).
func parseProduceQuery(q url.Values) (produceParams, error) {
	if err := checkQuery(q, "acks"); err != nil {
		return produceParams{}, err
	}
	a, err := queryEnum(q, "acks", "quorum", "quorum", "primary")
	if err != nil {
		return produceParams{}, err
	}
	if a == "primary" {
		return produceParams{acks: service.AcksPrimary}, nil
	}
	return produceParams{acks: service.AcksQuorum}, nil
}

// buildBatch checks a produce body and encodes its records into one
// batch; records without a timestamp get nowMs.
func buildBatch(body []byte, nowMs int64) (data []byte, count int, err error) {
	var in produceBody
	if err := decodeBody(body, &in); err != nil {
		return nil, 0, err
	}
	if len(in.Records) == 0 || len(in.Records) > httpRecordsMax {
		return nil, 0, wire.Errorf(wire.ErrInvalidRequest, "body field \"records\" has %d records; send 1..%d", len(in.Records), httpRecordsMax)
	}
	b, err := batch.NewBuilder(batch.Options{})
	if err != nil {
		return nil, 0, err
	}
	for i := range in.Records {
		br, err := in.Records[i].toBatch(i, nowMs)
		if err != nil {
			return nil, 0, err
		}
		if err := b.Append(br); err != nil {
			return nil, 0, wire.Errorf(wire.ErrMessageTooLarge, "records[%d]: %v; send fewer or smaller records per request", i, err)
		}
	}
	data, err = b.Build()
	if err != nil {
		return nil, 0, wire.Errorf(wire.ErrMessageTooLarge, "building the batch: %v", err)
	}
	return data, len(in.Records), nil
}

// toBatch checks record i and converts it.
func (rec *produceRecord) toBatch(i int, nowMs int64) (batch.Record, error) {
	where := func(f string) string { return "records[" + strconv.Itoa(i) + "]." + f }
	br := batch.Record{Timestamp: nowMs}
	var err error
	if br.Key, err = decodeBytes(where("key"), rec.Key, rec.KeyText); err != nil {
		return br, err
	}
	if br.Value, err = decodeBytes(where("value"), rec.Value, rec.ValueText); err != nil {
		return br, err
	}
	if rec.Timestamp != nil {
		if *rec.Timestamp < 0 {
			return br, wire.Errorf(wire.ErrInvalidTimestamp, "%s is %d; give ms since the Unix epoch (>= 0) or leave it out for the node's time", where("timestamp"), *rec.Timestamp)
		}
		br.Timestamp = *rec.Timestamp
	}
	for j := range rec.Headers {
		hd := &rec.Headers[j]
		hw := where("headers[" + strconv.Itoa(j) + "]")
		k, err := decodeBytes(hw+".key", hd.Key, hd.KeyText)
		if err != nil {
			return br, err
		}
		if k == nil {
			return br, wire.Errorf(wire.ErrInvalidRequest, "%s.key is missing; a header needs a key (key or key_text)", hw)
		}
		v, err := decodeBytes(hw+".value", hd.Value, hd.ValueText)
		if err != nil {
			return br, err
		}
		br.Headers = append(br.Headers, batch.RecordHeader{Key: k, Value: v})
	}
	return br, nil
}

func (h *API) produce(w http.ResponseWriter, r *http.Request) {
	ref, lead, err := h.partitionTarget(r)
	if err != nil {
		h.fail(w, err)
		return
	}
	params, err := parseProduceQuery(r.URL.Query())
	if err != nil {
		h.fail(w, err)
		return
	}
	body, err := readBody(w, r, h.bodyTimeout)
	if err != nil {
		h.fail(w, err)
		return
	}
	// Check the body here, so a bad one is refused without a hop; the
	// primary checks it again.
	data, count, err := buildBatch(body, time.Now().UnixMilli())
	if err != nil {
		h.fail(w, err)
		return
	}
	if !h.route(w, r, body, lead, wire.ErrNotPrimary) {
		return
	}
	req := &service.ProduceRequest{PartitionRef: ref, Acks: params.acks, Records: data}
	pr, err := await(func(done func(service.ProduceResult, error)) { h.svcOf(r).Produce(nil, req, done) })
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, produceAnswer{Topic: ref.Topic, Partition: ref.Partition, BaseOffset: pr.BaseOffset,
		LastOffset: pr.BaseOffset + int64(count) - 1, RecordCount: count, ServedBy: h.self})
}

// fetchParams are a fetch's query parameters.
type fetchParams struct {
	offset    int64
	maxBytes  uint32
	maxWaitMs uint32
}

// parseFetchQuery reads ?offset (default 0), max_bytes (1..RecordsBytesMax,
// default 1 MiB) and max_wait_ms (0..FetchWaitMsMax, default 0).
func parseFetchQuery(q url.Values) (fetchParams, error) {
	if err := checkQuery(q, "offset", "max_bytes", "max_wait_ms"); err != nil {
		return fetchParams{}, err
	}
	off, err := queryInt(q, "offset", 0, 0, 1<<63-1)
	if err != nil {
		return fetchParams{}, err
	}
	mb, err := queryInt(q, "max_bytes", httpFetchBytesDefault, 1, wire.RecordsBytesMax)
	if err != nil {
		return fetchParams{}, err
	}
	mw, err := queryInt(q, "max_wait_ms", 0, 0, wire.FetchWaitMsMax)
	if err != nil {
		return fetchParams{}, err
	}
	return fetchParams{offset: off, maxBytes: uint32(mb), maxWaitMs: uint32(mw)}, nil
}

func (h *API) fetch(w http.ResponseWriter, r *http.Request) {
	ref, lead, err := h.partitionTarget(r)
	if err != nil {
		h.fail(w, err)
		return
	}
	params, err := parseFetchQuery(r.URL.Query())
	if err != nil {
		h.fail(w, err)
		return
	}
	if !h.route(w, r, nil, lead, wire.ErrNotPrimary) {
		return
	}
	req := &service.FetchRequest{PartitionRef: ref, Offset: params.offset, MaxBytes: params.maxBytes, MinBytes: 1,
		MaxWait: msDuration(params.maxWaitMs)}
	res, err := await(func(done func(service.FetchResult, error)) { h.svcOf(r).Fetch(nil, req, done) })
	if err != nil {
		h.fail(w, err)
		return
	}
	// The batches are copied through the log's file system and the files
	// let go at once: JSON cannot be sent with sendfile.
	data, err := res.Records.AppendTo(make([]byte, 0, res.Records.Bytes))
	res.Records.Release()
	if err != nil {
		h.fail(w, err)
		return
	}
	out := fetchAnswer{Topic: ref.Topic, Partition: ref.Partition, HighWatermark: res.HighWatermark, LogStartOffset: res.LogStartOffset,
		ServedBy: h.self}
	out.Records, out.NextOffset, err = decodeRecords(data, params.offset)
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// decodeRecords turns the fetched batches into records at or after from,
// and returns the offset after the last batch (from when there is none).
// A batch that does not decode is CORRUPT_MESSAGE: skipping it would
// hide committed records from the caller.
func decodeRecords(data []byte, from int64) ([]fetchedRecord, int64, error) {
	out, next := []fetchedRecord{}, from
	batches, _, err := batch.Split(nil, data)
	if err != nil {
		return nil, 0, wire.Errorf(wire.ErrCorruptMessage, "the fetched log after offset %d: %v", next, err)
	}
	var it batch.Records
	for _, b := range batches {
		if err := it.Reset(b); err != nil {
			return nil, 0, wire.Errorf(wire.ErrCorruptMessage, "the fetched batch at offset %d: %v", next, err)
		}
		hdr := it.Header()
		next = max(next, hdr.LastOffset()+1)
		if hdr.IsControl() {
			continue
		}
		for it.Next() {
			rec := it.Record()
			if rec.Offset < from {
				continue
			}
			fr := fetchedRecord{Offset: rec.Offset, Timestamp: rec.Timestamp, Key: encodeBytes(rec.Key),
				Value: encodeBytes(rec.Value), Headers: []recordHeader{}}
			for _, hd := range rec.Headers {
				fr.Headers = append(fr.Headers, recordHeader{Key: encodeBytes(hd.Key), Value: encodeBytes(hd.Value)})
			}
			out = append(out, fr)
		}
		if err := it.Err(); err != nil {
			return nil, 0, wire.Errorf(wire.ErrCorruptMessage, "the fetched batch at offset %d: %v", hdr.BaseOffset, err)
		}
	}
	return out, next, nil
}

// partitionTarget resolves the topic and partition of the path to the
// service's reference (by topic id, at whatever generation the primary
// has) and the partition's primary (-1 when none is known).
func (h *API) partitionTarget(r *http.Request) (service.PartitionRef, int32, error) {
	p, err := pathPartition(r.PathValue("partition"))
	if err != nil {
		return service.PartitionRef{}, 0, err
	}
	return h.svcOf(r).Locate(r.PathValue("topic"), p)
}

// msDuration is a timeout given in ms as a duration.
func msDuration(ms uint32) time.Duration { return time.Duration(ms) * time.Millisecond }
