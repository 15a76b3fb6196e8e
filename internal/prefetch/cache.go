package prefetch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// fallbackL2 is L2Bytes where the system does not say: the size of a
// core's L2 cache on the AMD EPYC machines of docs/perf.md.
const fallbackL2 = 1 << 20

var l2 = sync.OnceValue(func() int {
	n, err := l2FromSysfs("/sys/devices/system/cpu/cpu0/cache")
	if err != nil {
		return fallbackL2
	}
	return n
})

// L2Bytes returns the size of the level-2 cache of CPU 0, as Linux
// reports it, or 1 MiB where it cannot tell. Tables that fit in it are
// not worth prefetching (cow.Map.PrefetchAhead).
func L2Bytes() int { return l2() }

// l2FromSysfs reads the size of the level-2 data or unified cache from dir,
// a Linux sysfs cache directory (index0, index1, … each with level, type
// and size).
func l2FromSysfs(dir string) (int, error) {
	for i := 0; ; i++ {
		idx := filepath.Join(dir, fmt.Sprintf("index%d", i))
		level, err := os.ReadFile(filepath.Join(idx, "level"))
		if errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("no level-2 data cache listed in %s", dir)
		}
		if err != nil {
			return 0, err
		}
		if strings.TrimSpace(string(level)) != "2" {
			continue
		}
		typ, err := os.ReadFile(filepath.Join(idx, "type"))
		if err != nil {
			return 0, err
		}
		if strings.TrimSpace(string(typ)) == "Instruction" {
			continue
		}
		size, err := os.ReadFile(filepath.Join(idx, "size"))
		if err != nil {
			return 0, err
		}
		n, err := parseCacheSize(strings.TrimSpace(string(size)))
		if err != nil {
			return 0, fmt.Errorf("%s: %w", filepath.Join(idx, "size"), err)
		}
		return n, nil
	}
}

// parseCacheSize parses a sysfs cache size: a count of bytes, with an
// optional K, M or G suffix (binary multiples).
func parseCacheSize(s string) (int, error) {
	mult := 1
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'K':
			mult, s = 1<<10, s[:n-1]
		case 'M':
			mult, s = 1<<20, s[:n-1]
		case 'G':
			mult, s = 1<<30, s[:n-1]
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > (1<<40)/mult {
		return 0, fmt.Errorf("cache size %q is not a positive size", s)
	}
	return n * mult, nil
}
