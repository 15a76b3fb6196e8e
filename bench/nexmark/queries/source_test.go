package queries

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/ringflow/ringflow/bench/nexmark"
)

// readAll reads a source to its end.
func readAll(t *testing.T, src interface {
	Read([]nexmark.Event) (int, error)
}) []nexmark.Event {
	t.Helper()
	var all []nexmark.Event
	buf := make([]nexmark.Event, 7)
	for {
		n, err := src.Read(buf)
		all = append(all, buf[:n]...)
		if errors.Is(err, io.EOF) {
			return all
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// The subtasks of a source together read every event once, each in
// event-time order, and a subtask reopened at a position it reported reads
// exactly the events after it.
func TestSourceSplitsAndRewinds(t *testing.T) {
	cfg := nexmark.DefaultConfig()
	cfg.NumEvents = 1000
	const p = 3
	total := 0
	for i := range p {
		src := Source(cfg)()
		if err := src.Open(i, p, nil); err != nil {
			t.Fatal(err)
		}
		buf := make([]nexmark.Event, 100)
		n, err := src.Read(buf)
		if err != nil || n != 100 {
			t.Fatalf("subtask %d: Read = %d, %v", i, n, err)
		}
		pos := src.Position()
		rest := readAll(t, src)
		again := Source(cfg)()
		if err := again.Open(i, p, pos); err != nil {
			t.Fatal(err)
		}
		replay := readAll(t, again)
		if len(replay) != len(rest) {
			t.Fatalf("subtask %d: %d events after the position, %d on replay", i, len(rest), len(replay))
		}
		for k := range rest {
			if rest[k] != replay[k] {
				t.Fatalf("subtask %d: event %d after the position differs on replay", i, k)
			}
		}
		all := append(buf[:n:n], rest...)
		for k := range all {
			if k > 0 && all[k].DateTime() < all[k-1].DateTime() {
				t.Fatalf("subtask %d: event time goes back at event %d", i, k)
			}
		}
		total += len(all)
	}
	if total != int(cfg.NumEvents) {
		t.Fatalf("subtasks read %d events, want %d", total, cfg.NumEvents)
	}
}

func TestSourceBadPosition(t *testing.T) {
	cfg := nexmark.DefaultConfig()
	for _, c := range []struct {
		pos  []byte
		want string
	}{
		{[]byte{1, 2, 3}, "position of 3 bytes"},
		{[]byte{2, 0, 0, 0, 0, 0, 0, 0}, "not an event of this generator"}, // subtask 1 of 2 has odd positions
	} {
		err := Source(cfg)().Open(1, 2, c.pos)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open at %v = %v, want an error containing %q", c.pos, err, c.want)
		}
	}
}
