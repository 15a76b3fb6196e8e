package pipelines

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/internal/testseed"
)

var seeds = testseed.Flag("pipelines.seed", "")

// digestLine is the checksum contribution of one line of pipeline's file
// output: the digest of the record the line was made from.
func digestLine(t *testing.T, pipeline, line string) uint64 {
	f := strings.Fields(line)
	v := make([]uint64, len(f))
	for i := range f {
		n, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		v[i] = n
	}
	want := map[string]int{"passthrough": 3, "map-filter": 3, "keyed-count": 2, "window": 3, "join": 3}[pipeline]
	if len(v) != want {
		t.Fatalf("%s line %q: %d fields, want %d", pipeline, line, len(v), want)
	}
	switch pipeline {
	case "keyed-count":
		return digestCount(&Record{Key: v[0], Value: int64(v[1])})
	case "window":
		return digest(v[0], v[1], v[2])
	case "join":
		return digestJoined(&Joined{Key: v[0], LeftSeq: v[1], RightSeq: v[2]})
	}
	return digestRecord(&Record{Seq: v[0], Key: v[1], Value: int64(v[2])})
}

// committedOutput reads every committed part file of dir and returns the
// number of lines and the sum of their digests.
func committedOutput(t *testing.T, pipeline, dir string) (count, sum uint64) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "part-") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			if line != "" {
				count++
				sum += digestLine(t, pipeline, line)
			}
		}
	}
	return count, sum
}

// TestFileSinkAfterFailure runs every pipeline with checkpoints into the
// transactional file sink, with a failure injected at a random record: the
// job restarts once, and the committed lines are exactly the oracle's
// output.
func TestFileSinkAfterFailure(t *testing.T) {
	rnd := rand.New(rand.NewPCG(seeds.Seed(t), 7))
	for _, name := range Names {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			c := smallConfig(name, 2)
			c.Rate = 300_000 // a few checkpoints before the failure
			c.Checkpoint = ringflow.CheckpointConfig{Interval: 5 * time.Millisecond, StateDir: filepath.Join(dir, "state")}
			c.Restart = ringflow.RestartStrategy{Attempts: 1}
			c.SinkDir = filepath.Join(dir, "out")
			c.FailAfter = 1 + rnd.Uint64N(specOf(c.withDefaults(), seedMain).records-1)
			res, err := Run(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			wantCount, wantSum := oracle(c)
			count, sum := committedOutput(t, name, c.SinkDir)
			if count != wantCount || sum != wantSum {
				t.Errorf("committed %d lines, checksum %#x; want %d, %#x", count, sum, wantCount, wantSum)
			}
			if res.Restarts != 1 || len(res.Checkpoints) == 0 {
				t.Errorf("%d restarts, %d checkpoints; want 1 restart and some checkpoints", res.Restarts, len(res.Checkpoints))
			}
			t.Logf("failure after %d records; %d checkpoints; restored from %d", c.FailAfter, len(res.Checkpoints), res.RestoredFrom)
		})
	}
}

// TestHotKeys checks the HotKeys pattern: the first Keys records take each
// key once, in order, the rest only keys below HotKeys; and ringflow's
// and the baseline's outputs still match the oracle.
func TestHotKeys(t *testing.T) {
	c := Config{Pipeline: "keyed-count", Records: 20_000, Parallelism: 2, Workers: 2, Keys: 5000, HotKeys: 50}
	g := sourceGen(c, seedMain)
	hot := map[uint64]bool{}
	for seq := range c.Records {
		r := g.record(seq)
		switch {
		case seq < c.Keys && r.Key != seq:
			t.Fatalf("record %d has key %d, want %d", seq, r.Key, seq)
		case seq >= c.Keys && r.Key >= c.HotKeys:
			t.Fatalf("record %d has key %d, not below the %d hot keys", seq, r.Key, c.HotKeys)
		case seq >= c.Keys:
			hot[r.Key] = true
		}
	}
	if len(hot) != int(c.HotKeys) {
		t.Errorf("%d distinct hot keys, want all %d", len(hot), c.HotKeys)
	}
	wantCount, wantSum := oracle(c)
	for _, run := range []func(context.Context, Config) (Result, error){Run, RunBaseline} {
		res, err := run(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		if res.SinkRecords != wantCount || res.Checksum != wantSum {
			t.Errorf("%s: %d records, checksum %#x; want %d, %#x", res.Engine, res.SinkRecords, res.Checksum, wantCount, wantSum)
		}
	}
}

// TestDigestLine checks that the file lines carry what the digests need:
// a line made from a record digests as the record does.
func TestDigestLine(t *testing.T) {
	r := Record{Seq: 7, Key: 3, Value: 12}
	w := windowOut{Key: 3, Start: 2000, End: 3000, Value: WindowCount{Count: 9}}
	j := Joined{Key: 3, LeftSeq: 5, RightSeq: 8}
	for _, tc := range []struct {
		pipeline string
		line     []byte
		want     uint64
	}{
		{"passthrough", recordLine(nil, r), digestRecord(&r)},
		{"keyed-count", countLine(nil, r), digestCount(&r)},
		{"window", windowLine(nil, w), digestWindowOut(&w)},
		{"join", joinedLine(nil, j), digestJoined(&j)},
	} {
		if got := digestLine(t, tc.pipeline, string(tc.line)); got != tc.want {
			t.Errorf("%s line %q: digest %#x, want %#x", tc.pipeline, tc.line, got, tc.want)
		}
	}
	if got := string(countLine(nil, r)); got != "3 12" {
		t.Errorf("keyed-count line %q, want \"3 12\"", got)
	}
}
