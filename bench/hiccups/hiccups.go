// Package hiccups measures how often, and for how long, a machine takes
// its cores away from a thread that only wants to run: the floor under
// every latency and synchronous-part figure measured on it.
//
// One thread per CPU, pinned there, reads the wall clock and its own CPU
// clock in a tight loop. Two readings further apart than a threshold are a
// gap, the loop's own work being well under a microsecond, and the CPU
// clock tells two kinds apart (Classify):
//
//   - off its core: the thread's clock stood still for most of the gap.
//     The kernel ran something else on the CPU (another thread, a kernel
//     worker), or, in a guest whose kernel accounts steal time, the host
//     ran something else on the virtual CPU.
//   - on its core: the thread's clock counted the gap, but the loop did not
//     run. Interrupt handling charged to the thread (kernels without
//     IRQ_TIME_ACCOUNTING) and, in a guest, the hypervisor's own work on
//     the virtual CPU (a fault on guest memory the host had taken back)
//     look like this: no scheduler sees them.
//
// A program's code cannot avoid either, and a figure measured in an hour
// when they are frequent says more about the hour than about the code.
package hiccups

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ringflow/ringflow/internal/affinity"
)

// Config says what to measure.
type Config struct {
	// Duration is how long each thread runs its loop.
	Duration time.Duration
	// Threshold is the shortest gap counted (default 20µs).
	Threshold time.Duration
	// CPUs are the CPUs to measure, one thread each (default: every CPU
	// the process may use).
	CPUs []int
}

// Kind is how a gap was spent.
type Kind int

const (
	OnCPU  Kind = iota // the thread's CPU clock counted the gap
	OffCPU             // the thread was off its core for most of it
)

func (k Kind) String() string {
	if k == OffCPU {
		return "off cpu"
	}
	return "on cpu"
}

// Classify says how a gap of wall time, in which the thread's CPU clock
// advanced by cpu, was spent: off its core if the clock counted less than
// half of it.
func Classify(wall, cpu time.Duration) Kind {
	if cpu < wall/2 {
		return OffCPU
	}
	return OnCPU
}

// Gaps sums the gaps of one kind.
type Gaps struct {
	Count int           `json:"count"`
	Total time.Duration `json:"total_ns"`
	Max   time.Duration `json:"max_ns"`
	// Over100us counts the gaps longer than 100µs: the size of the
	// synchronous part's bound.
	Over100us int `json:"over_100us"`
}

func (g *Gaps) add(d time.Duration) {
	g.Count++
	g.Total += d
	g.Max = max(g.Max, d)
	if d > 100*time.Microsecond {
		g.Over100us++
	}
}

// CPU is what one CPU's thread saw.
type CPU struct {
	CPU     int           `json:"cpu"`
	Elapsed time.Duration `json:"elapsed_ns"`
	Loops   int64         `json:"loops"`
	On      Gaps          `json:"on_cpu"`
	Off     Gaps          `json:"off_cpu"`
}

// Add counts a gap of wall time in which the thread's CPU clock advanced
// by cpu, if it is at least threshold long.
func (c *CPU) Add(wall, cpu, threshold time.Duration) {
	if wall < threshold {
		return
	}
	if Classify(wall, cpu) == OffCPU {
		c.Off.add(wall)
	} else {
		c.On.add(wall)
	}
}

// Result is a measurement.
type Result struct {
	Threshold time.Duration `json:"threshold_ns"`
	CPUs      []CPU         `json:"cpus"`
	// Steal is the time the kernel counted as stolen by the host on all
	// CPUs during the run (/proc/stat; -1 if it cannot be read).
	Steal time.Duration `json:"steal_ns"`
}

// Run measures for cfg.Duration, one pinned thread per CPU.
func Run(cfg Config) (Result, error) {
	if cfg.Duration <= 0 {
		return Result{}, fmt.Errorf("hiccups: duration %v, want > 0", cfg.Duration)
	}
	if cfg.Threshold == 0 {
		cfg.Threshold = 20 * time.Microsecond
	}
	if cfg.Threshold < 0 {
		return Result{}, fmt.Errorf("hiccups: threshold %v, want > 0", cfg.Threshold)
	}
	cpus := cfg.CPUs
	if len(cpus) == 0 {
		var err error
		if cpus, err = affinity.Usable(); err != nil {
			return Result{}, fmt.Errorf("hiccups: %w", err)
		}
	}
	res := Result{Threshold: cfg.Threshold, CPUs: make([]CPU, len(cpus))}
	stealBefore, stealErr := readSteal()
	errs := make([]error, len(cpus))
	var wg sync.WaitGroup
	for i, cpu := range cpus {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res.CPUs[i], errs[i] = measure(cpu, cfg.Duration, cfg.Threshold)
		}()
	}
	wg.Wait()
	res.Steal = -1
	if stealAfter, err := readSteal(); err == nil && stealErr == nil {
		res.Steal = stealAfter - stealBefore
	}
	return res, errors.Join(errs...)
}

// measure runs one CPU's loop on the calling goroutine.
func measure(cpu int, d, threshold time.Duration) (CPU, error) {
	unpin, err := affinity.Pin(cpu)
	if err != nil {
		return CPU{CPU: cpu}, err
	}
	defer unpin()
	c := CPU{CPU: cpu}
	start := time.Now()
	prev, prevCPU := start, affinity.ThreadCPU()
	if prevCPU == 0 {
		return c, fmt.Errorf("hiccups: CPU %d: the thread's CPU clock cannot be read", cpu)
	}
	for {
		now, nowCPU := time.Now(), affinity.ThreadCPU()
		c.Loops++
		c.Add(now.Sub(prev), nowCPU-prevCPU, threshold)
		prev, prevCPU = now, nowCPU
		if c.Elapsed = now.Sub(start); c.Elapsed >= d {
			return c, nil
		}
	}
}

// readSteal returns the steal time /proc/stat counts on all CPUs.
func readSteal() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	return parseSteal(string(b))
}

// userHz is the unit of /proc/stat's times: USER_HZ, 100 on every Linux
// architecture Go runs on.
const userHz = 100

// parseSteal reads the steal field (the eighth number) of /proc/stat's
// "cpu" line.
func parseSteal(stat string) (time.Duration, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("hiccups: /proc/stat's first line %q has no steal field", line)
	}
	ticks, err := strconv.ParseUint(f[8], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("hiccups: /proc/stat's steal field %q: %w", f[8], err)
	}
	return time.Duration(ticks) * time.Second / userHz, nil
}
