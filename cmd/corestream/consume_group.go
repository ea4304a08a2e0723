package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/corestream/corestream/client"
)

// consumeGroup consumes topic as a member of group o.group, as
// kafka-console-consumer --group, kcat -G and rpk topic consume -g do:
// the group's members share the topic's partitions, each partition starts
// at the group's committed offset (else at start), positions are
// committed as records are printed (automatic commits, and at every
// rebalance) and on exit, and the member leaves the group cleanly. It
// runs until interrupted (Ctrl-C), or until --count records, committing
// no record past the last printed.
func consumeGroup(ctx context.Context, a *app, c *client.Client, topic string, start client.Start, o consumeOpts) error {
	g, err := c.NewGroupConsumer(client.GroupConfig{Group: o.group, Start: start,
		Consumer: client.ConsumerConfig{Rack: o.rack}})
	if err != nil {
		return err
	}
	if err := g.Subscribe(topic); err != nil {
		g.Close()
		return err
	}
	w := bufio.NewWriter(a.stdout)
	printed := 0
	var pollErr error
	for o.count == 0 || printed < o.count {
		// With --count, no more than the records still to print: the
		// positions committed at close pass only what was printed.
		recs, err := g.PollRecords(ctx, o.count-printed)
		if err != nil {
			if ctx.Err() == nil {
				pollErr = err
			}
			break // interrupted: a normal end
		}
		for i := range recs {
			if o.count > 0 && printed >= o.count {
				break
			}
			printRecord(w, a.json, &recs[i], o)
			printed++
		}
		w.Flush()
	}
	w.Flush()
	// Close commits the positions of what Poll returned, then leaves.
	if err := g.Close(); err != nil {
		return errors.Join(pollErr, err)
	}
	return pollErr
}

// recordFormat is a parsed --format string: kcat's -f tokens.
type recordFormat []formatPiece

// formatPiece is literal text, or one field of the record (verb != 0).
type formatPiece struct {
	text string
	verb byte
}

// formatVerbs are the fields --format prints, as kcat names them.
const formatVerbs = "tpokKsSTh"

// parseFormat reads a --format string: %t topic, %p partition, %o offset,
// %k key, %K key length, %s value, %S value length, %T timestamp (Unix
// ms), %h headers (key=value, comma-separated, as kcat), %% a percent
// sign; \n, \t and \\ are a newline, a tab and a
// backslash. Anything else is a usage error naming it.
func parseFormat(f string) (recordFormat, error) {
	var out recordFormat
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			out = append(out, formatPiece{text: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(f); i++ {
		switch ch := f[i]; {
		case ch == '%' && i+1 < len(f) && f[i+1] == '%':
			lit.WriteByte('%')
			i++
		case ch == '%' && i+1 < len(f) && strings.IndexByte(formatVerbs, f[i+1]) >= 0:
			flush()
			out = append(out, formatPiece{verb: f[i+1]})
			i++
		case ch == '%':
			return nil, usageErrorf("--format %q: %%%s is not one of %%t %%p %%o %%k %%K %%s %%S %%T %%h %%%%", f, f[i+1:min(i+2, len(f))])
		case ch == '\\' && i+1 < len(f):
			switch f[i+1] {
			case 'n':
				lit.WriteByte('\n')
			case 't':
				lit.WriteByte('\t')
			case '\\':
				lit.WriteByte('\\')
			default:
				return nil, usageErrorf("--format %q: \\%c is not one of \\n \\t \\\\", f, f[i+1])
			}
			i++
		default:
			lit.WriteByte(ch)
		}
	}
	flush()
	return out, nil
}

// print writes r as the format says.
func (rf recordFormat) print(w *bufio.Writer, r *client.Record) {
	for _, p := range rf {
		switch p.verb {
		case 0:
			w.WriteString(p.text)
		case 't':
			w.WriteString(r.Topic)
		case 'p':
			w.WriteString(strconv.FormatInt(int64(r.Partition), 10))
		case 'o':
			w.WriteString(strconv.FormatInt(r.Offset, 10))
		case 'k':
			w.Write(r.Key)
		case 'K':
			w.WriteString(strconv.Itoa(lenOrNull(r.Key)))
		case 's':
			w.Write(r.Value)
		case 'S':
			w.WriteString(strconv.Itoa(lenOrNull(r.Value)))
		case 'T':
			w.WriteString(strconv.FormatInt(r.Timestamp.UnixMilli(), 10))
		case 'h':
			for i, h := range r.Headers {
				if i > 0 {
					w.WriteByte(',')
				}
				w.Write(h.Key)
				w.WriteByte('=')
				w.Write(h.Value)
			}
		default:
			panic(fmt.Sprintf("format verb %q not handled", p.verb))
		}
	}
}

// lenOrNull is len(b), or -1 for a null (nil) key or value, as kcat prints.
func lenOrNull(b []byte) int {
	if b == nil {
		return -1
	}
	return len(b)
}
