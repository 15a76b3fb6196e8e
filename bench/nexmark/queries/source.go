package queries

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/bench/nexmark"
)

// OutOfOrderness is the watermark delay of every query's source, as in the
// Flink DDL: WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND.
const OutOfOrderness = 4 * time.Second

// Source returns a ringflow source of cfg's events: subtask i of p
// generates part i of cfg.Split(p). Its position is the generator's next
// event number, 8 bytes little-endian, so a restored source rewinds
// exactly.
func Source(cfg nexmark.Config) ringflow.NewSource[nexmark.Event] {
	return func() ringflow.SourceFunc[nexmark.Event] { return &source{cfg: cfg} }
}

// Watermarks is the watermark strategy of the queries' sources: event time
// is the event's DateTime, watermarks trail the newest by OutOfOrderness.
func Watermarks() ringflow.WatermarkStrategy[nexmark.Event] {
	return ringflow.WatermarkStrategy[nexmark.Event]{TimestampPtr: eventTime, OutOfOrderness: OutOfOrderness}
}

// eventTime takes the event by pointer: a copy of its ~400 bytes per call
// was a tenth of q7's time.
func eventTime(ev *nexmark.Event) int64 { return ev.DateTime() }

// source is one subtask's generator.
type source struct {
	cfg nexmark.Config
	gen *nexmark.Generator
}

func (s *source) Open(subtask, parallelism int, pos []byte) error {
	parts, err := s.cfg.Split(parallelism)
	if err != nil {
		return fmt.Errorf("nexmark source: %w", err)
	}
	if subtask < 0 || subtask >= parallelism {
		return fmt.Errorf("nexmark source: subtask %d of %d", subtask, parallelism)
	}
	g, err := nexmark.NewGenerator(parts[subtask])
	if err != nil {
		return fmt.Errorf("nexmark source: %w", err)
	}
	if pos != nil {
		if len(pos) != 8 {
			return fmt.Errorf("nexmark source: position of %d bytes, want 8", len(pos))
		}
		if err := g.Seek(binary.LittleEndian.Uint64(pos)); err != nil {
			return fmt.Errorf("nexmark source subtask %d of %d: %w", subtask, parallelism, err)
		}
	}
	s.gen = g
	return nil
}

func (s *source) Read(buf []nexmark.Event) (int, error) {
	for i := range buf {
		if !s.gen.Next(&buf[i]) {
			if i == 0 {
				return 0, io.EOF
			}
			return i, nil
		}
	}
	return len(buf), nil
}

func (s *source) Position() []byte {
	return binary.LittleEndian.AppendUint64(nil, s.gen.Position())
}

func (s *source) Close() error { return nil }
