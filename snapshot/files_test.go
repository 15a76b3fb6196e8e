package snapshot

import (
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestFileCountBounded: a long run of commits leaves the store's directory
// with a bounded number of tables — the retained checkpoints' and a few
// tombstone tables not yet compacted — not one or two per checkpoint ever
// committed.
func TestFileCountBounded(t *testing.T) {
	fs := vfs.NewMem()
	s, _ := openTest(t, fs, 2)
	defer s.Close()
	const commits = 120
	for id := uint64(1); id <= commits; id++ {
		commitFull(t, s, id, 4, int(id), 64)
	}
	tables := func() int {
		names, err := fs.List(fs.PathJoin(testDir, "db"))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, name := range names {
			if strings.HasSuffix(name, ".sst") {
				n++
			}
		}
		return n
	}
	// Each retained checkpoint has a blob table and a manifest table; the
	// tombstone tables in L0 are compacted at l0Files (8) of them, and a
	// few more may come while a compaction runs. Pebble compacts in the
	// background: wait for it to get there.
	const bound = 2*2 + 2*8
	n := tables()
	for deadline := time.Now().Add(30 * time.Second); n > bound && time.Now().Before(deadline); n = tables() {
		time.Sleep(10 * time.Millisecond)
	}
	if n > bound {
		t.Fatalf("%d tables after %d commits keeping 2; want at most %d", n, commits, bound)
	}
}
