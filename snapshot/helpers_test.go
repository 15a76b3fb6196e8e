package snapshot

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ringflow/ringflow/internal/testseed"
)

var seeds = testseed.Flag("snapshot.seed", "SNAPSHOT_SEED")

// testLogger is a slog.Handler that forwards every record to the test log
// and keeps those at level Error, each as its message followed by its
// attributes (key=value).
type testLogger struct {
	t  testing.TB
	mu *struct {
		sync.Mutex
		errors []string
	}
	attrs []slog.Attr
}

func newTestLogger(t testing.TB) *testLogger {
	return &testLogger{t: t, mu: &struct {
		sync.Mutex
		errors []string
	}{}}
}

// slog returns a logger writing to l.
func (l *testLogger) slog() *slog.Logger { return slog.New(l) }

func (l *testLogger) Enabled(context.Context, slog.Level) bool { return true }

func (l *testLogger) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	add := func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true }
	for _, a := range l.attrs {
		add(a)
	}
	r.Attrs(add)
	l.t.Logf("%s %s", r.Level, b.String())
	if r.Level >= slog.LevelError {
		l.mu.Lock()
		l.mu.errors = append(l.mu.errors, b.String())
		l.mu.Unlock()
	}
	return nil
}

func (l *testLogger) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *l
	c.attrs = append(slices.Clip(l.attrs), attrs...)
	return &c
}

func (l *testLogger) WithGroup(string) slog.Handler { return l }

// errorsContaining returns the logged error lines containing every part.
func (l *testLogger) errorsContaining(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
outer:
	for _, line := range l.mu.errors {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				continue outer
			}
		}
		out = append(out, line)
	}
	return out
}

const testDir = "state"

func openTest(t testing.TB, fs vfs.FS, retained int) (*Store, *testLogger) {
	t.Helper()
	lg := newTestLogger(t)
	s, err := Open(testDir, Options{FS: fs, Retained: retained, Logger: lg.slog()})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s, lg
}

func testMeta() Meta {
	return Meta{MaxParallelism: 128, Parallelism: map[string]int{"count": 2, "src": 2, "sink": 2}}
}

// blob returns deterministic bytes for (checkpoint, key group, version).
func blob(kg, version, size int) []byte {
	b := make([]byte, size)
	r := rand.New(rand.NewPCG(uint64(kg), uint64(version)))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// commitFull writes key groups [0, kgs) of "count" at the given version.
func commitFull(t testing.TB, s *Store, id uint64, kgs, version, size int) {
	t.Helper()
	p, err := s.Begin(id)
	if err != nil {
		t.Fatalf("Begin(%d): %v", id, err)
	}
	for kg := 0; kg < kgs; kg++ {
		if err := p.PutKeyGroup("count", kg, blob(kg, version, size)); err != nil {
			t.Fatalf("PutKeyGroup: %v", err)
		}
	}
	if err := p.PutSourcePosition("src", 0, []byte(fmt.Sprintf("offset-%d", id))); err != nil {
		t.Fatalf("PutSourcePosition: %v", err)
	}
	if err := p.Commit(testMeta()); err != nil {
		t.Fatalf("Commit(%d): %v", id, err)
	}
}

// checkKeyGroups asserts c holds key groups [0, kgs) at versions[kg].
func checkKeyGroups(t testing.TB, c *Checkpoint, versions []int, size int) {
	t.Helper()
	for kg, v := range versions {
		got, ok := c.KeyGroup("count", kg)
		if !ok {
			t.Fatalf("checkpoint %d: key group %d missing", c.ID(), kg)
		}
		if !bytes.Equal(got, blob(kg, v, size)) {
			t.Fatalf("checkpoint %d: key group %d does not hold version %d", c.ID(), kg, v)
		}
	}
}

// rawKeys lists the keys stored under prefix, as printable strings.
func rawKeys(t testing.TB, s *Store, prefix byte) []string {
	t.Helper()
	var keys []string
	err := s.scanPrefix(prefix, func(key, _ []byte) { keys = append(keys, describeKey(key)) })
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	return keys
}

func describeKey(key []byte) string {
	switch key[0] {
	case prefixBlob:
		origin, _ := decodeBlobKeyOrigin(key)
		k, err := decodeEntryKey(key[9:])
		if err != nil {
			return fmt.Sprintf("bad blob key %q", key)
		}
		return fmt.Sprintf("blob %d %s", origin, k)
	default:
		id, _ := decodeIDKey(key)
		return fmt.Sprintf("%c %d", key[0], id)
	}
}

// setRawForTest overwrites (value != nil) or deletes (value == nil) a raw
// key, bypassing every check: the test hook that injects corruption.
func (s *Store) setRawForTest(key, value []byte) error {
	s.ingestMu.Lock()
	defer s.ingestMu.Unlock()
	return s.withDB(func(db *pebble.DB) error {
		_, err := s.ingest(db, "test", []sstKV{{key: key, value: value, delete: value == nil}})
		return err
	})
}
