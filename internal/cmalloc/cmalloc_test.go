package cmalloc

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// anonKB reads the process's resident anonymous memory.
func anonKB(t *testing.T) int {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "RssAnon:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				t.Fatalf("RssAnon line %q: %v", sc.Text(), err)
			}
			return kb
		}
	}
	t.Fatal("no RssAnon line in /proc/self/status")
	return 0
}

// TestTrimReleasesHoles leaves 32 MiB of freed chunks between live ones,
// which glibc keeps resident, and checks that Trim gives most of it back.
func TestTrimReleasesHoles(t *testing.T) {
	if !Supported() {
		t.Skip("Trim does nothing in this build (no cgo, or not glibc)")
	}
	const chunks, size = 1024, 64 << 10 // under glibc's mmap threshold
	Trim()
	live := scatter(chunks, size)
	defer release(live)
	before := anonKB(t)
	if !Trim() {
		t.Error("Trim reported nothing released")
	}
	after := anonKB(t)
	freed := (chunks / 2) * size / 1024
	if got := before - after; got < freed/2 {
		t.Errorf("Trim released %d kB of resident memory; want at least half of the %d kB freed", got, freed)
	}
}
