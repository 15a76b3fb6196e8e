package prefetch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseCacheSize(t *testing.T) {
	for s, want := range map[string]int{"1024K": 1 << 20, "2M": 2 << 20, "512": 512, "48K": 48 << 10, "1G": 1 << 30} {
		if got, err := parseCacheSize(s); err != nil || got != want {
			t.Errorf("parseCacheSize(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "K", "-1K", "0", "1.5M", "12Q", "99999999999G"} {
		if got, err := parseCacheSize(s); err == nil {
			t.Errorf("parseCacheSize(%q) = %d, want an error", s, got)
		}
	}
}

// writeCaches lays out a sysfs cache directory: one index per entry of
// "level type size".
func writeCaches(t *testing.T, caches ...string) string {
	dir := t.TempDir()
	for i, c := range caches {
		f := strings.Fields(c)
		idx := filepath.Join(dir, "index"+string(rune('0'+i)))
		if err := os.Mkdir(idx, 0o755); err != nil {
			t.Fatal(err)
		}
		for j, name := range []string{"level", "type", "size"} {
			if err := os.WriteFile(filepath.Join(idx, name), []byte(f[j]+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

func TestL2FromSysfs(t *testing.T) {
	dir := writeCaches(t, "1 Data 48K", "1 Instruction 32K", "2 Unified 1024K", "3 Unified 32768K")
	if n, err := l2FromSysfs(dir); err != nil || n != 1<<20 {
		t.Errorf("l2FromSysfs = %d, %v; want 1 MiB", n, err)
	}
	// An instruction cache at level 2 is not the one.
	dir = writeCaches(t, "1 Data 32K", "2 Instruction 256K", "2 Data 2M")
	if n, err := l2FromSysfs(dir); err != nil || n != 2<<20 {
		t.Errorf("l2FromSysfs = %d, %v; want 2 MiB", n, err)
	}
	if n, err := l2FromSysfs(writeCaches(t, "1 Data 32K", "3 Unified 8M")); err == nil {
		t.Errorf("l2FromSysfs with no level 2 = %d, want an error", n)
	}
	if n, err := l2FromSysfs(writeCaches(t, "2 Unified lots")); err == nil || !strings.Contains(err.Error(), "lots") {
		t.Errorf("l2FromSysfs with a bad size = %d, %v; want an error naming it", n, err)
	}
	if n := L2Bytes(); n <= 0 {
		t.Errorf("L2Bytes = %d", n)
	}
}
