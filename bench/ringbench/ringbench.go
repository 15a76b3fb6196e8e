// Package ringbench measures moving fixed-size records from one thread to
// another: through a ring, and through the two ways a Go programmer would do
// it with channels (one record per send; batches of records recycled through
// a pool). Every transport moves the same records and the consumer checks
// each one, so the figures compare like with like.
//
// A record of S bytes holds its sequence number in its first 8 bytes, a
// fixed fill pattern, and the complement of the sequence number in its last
// 8 bytes; the consumer checks both ends of every record.
package ringbench

import (
	"fmt"
	"runtime"
	"time"

	"github.com/ringflow/ringflow/internal/affinity"
)

// Config describes one measurement.
type Config struct {
	RecordBytes int    // 8, 16, 32, 64, 128 or 256
	Batch       int    // records per ring frame and per channel batch
	Records     uint64 // records to move per transport
	Capacity    int    // ring capacity in bytes (default 1 MiB)
}

// Result is one transport's figures.
type Result struct {
	Name            string  `json:"name"`
	RecordsPerSec   float64 `json:"records_per_sec"`
	BytesPerSec     float64 `json:"bytes_per_sec"`
	AllocsPerRecord float64 `json:"allocs_per_record"`
	Seconds         float64 `json:"seconds"`
}

// Transports lists the transport names in the order Run measures them.
var Transports = []string{"ring", "chan", "chan-batched"}

// ChanCapacity is the buffer of the one-record-per-send channel;
// BatchChanCapacity that of the batched channel, in batches.
const (
	ChanCapacity      = 1024
	BatchChanCapacity = 64
)

// Validate reports what is wrong with c, if anything.
func (c Config) Validate() error {
	if _, ok := kinds[c.RecordBytes]; !ok {
		return fmt.Errorf("record size %d bytes: must be one of 8, 16, 32, 64, 128, 256", c.RecordBytes)
	}
	if c.Batch < 1 || c.Batch > 1<<16 {
		return fmt.Errorf("batch %d: must be in [1, 65536]", c.Batch)
	}
	if c.Records < 1 {
		return fmt.Errorf("records %d: must be at least 1", c.Records)
	}
	return nil
}

// Run measures every transport in Transports, one after the other.
func Run(c Config) ([]Result, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Capacity == 0 {
		c.Capacity = 1 << 20
	}
	var out []Result
	for _, name := range Transports {
		r, err := kinds[c.RecordBytes](name, c)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// measure runs produce and consume on two goroutines and turns the time and
// allocations they took into a Result. For the ring, each goroutine is
// locked to its own thread and pinned to its own CPU. The channel baselines
// run as a Go programmer would run them, on plain goroutines: a goroutine
// locked to a thread that blocks on a channel hands its thread off through
// the OS, which would make them look slower than they are.
func measure(name string, c Config, produce func() error, consume func() error) (Result, error) {
	cpus, err := affinity.Usable()
	if err != nil {
		return Result{}, err
	}
	pinned := name == "ring"
	pin := func(i int) (func(), error) {
		if !pinned {
			return func() {}, nil
		}
		return affinity.Pin(cpus[i%len(cpus)])
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	errc := make(chan error, 1)
	go func() {
		unpin, err := pin(0)
		if err != nil {
			errc <- err
			return
		}
		defer unpin()
		errc <- produce()
	}()
	unpin, err := pin(1)
	if err != nil {
		return Result{}, err
	}
	cerr := consume()
	unpin()
	perr := <-errc
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	if cerr != nil {
		return Result{}, cerr
	}
	if perr != nil {
		return Result{}, perr
	}
	secs := elapsed.Seconds()
	return Result{
		Name:            name,
		RecordsPerSec:   float64(c.Records) / secs,
		BytesPerSec:     float64(c.Records) * float64(c.RecordBytes) / secs,
		AllocsPerRecord: float64(after.Mallocs-before.Mallocs) / float64(c.Records),
		Seconds:         secs,
	}, nil
}
