package ringbench

import (
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/ringflow/ringflow/ring"
)

// flushBytes is how many unpublished bytes the ring producer lets build up
// before it publishes: lazy publication, so that the consumer's cache misses
// on the producer position are few. The producer also publishes whenever it
// must wait for room, and at the end.
const flushBytes = 64 << 10

func runRing[R any, P record[R]](c Config) (Result, error) {
	r, err := ring.New(ring.Options{Capacity: c.Capacity})
	if err != nil {
		return Result{}, err
	}
	defer r.Close()
	size := int(unsafe.Sizeof(*new(R)))
	if c.Batch*size > r.Writer().MaxPayload() {
		return Result{}, fmt.Errorf("a batch of %d records of %d bytes exceeds the ring's largest frame", c.Batch, size)
	}
	// The template holds one record as set() would write it, fill
	// included; the producer copies it and then stamps the sequence number
	// and its complement in place, which writes the same bytes as set().
	var tmpl R
	P(&tmpl).set(0)
	fill := unsafe.Slice((*byte)(unsafe.Pointer(&tmpl)), size)
	deadline := time.Now().Add(time.Hour)
	produce := func() error {
		w := r.Writer()
		for next := uint64(0); next < c.Records; {
			k := int(min(uint64(c.Batch), c.Records-next))
			p := w.ReservePointer(k * size)
			if p == nil {
				if err := w.Wait(k*size, deadline); err != nil {
					return err
				}
				continue
			}
			writeRecords(p, k, size, next, fill)
			next += uint64(k)
			w.Commit(k*size, k)
			if w.Unflushed() >= flushBytes {
				w.Flush()
			}
		}
		w.Flush()
		return nil
	}
	consume := func() error {
		rd := r.Reader()
		for next := uint64(0); next < c.Records; {
			f, err := rd.Next()
			if err == ring.ErrEmpty {
				if err := rd.Wait(deadline); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
			if f.Type != ring.FrameData || f.Count*size != len(f.Payload) {
				return fmt.Errorf("unexpected %s frame of %d bytes, %d records", f.Type, len(f.Payload), f.Count)
			}
			if bad, ok := checkRecords(unsafe.Pointer(unsafe.SliceData(f.Payload)), f.Count, size, next); !ok {
				return corrupt(bad)
			}
			next += uint64(f.Count)
			rd.Release(f)
		}
		return nil
	}
	return measure("ring", c, produce, consume)
}

// writeRecords writes k records of size bytes at p, numbered from first:
// each a copy of fill with its sequence number in its first 8 bytes and,
// for records over 8 bytes, its complement in its last 8.
func writeRecords(p unsafe.Pointer, k, size int, first uint64, fill []byte) {
	for i := range k {
		rec := unsafe.Add(p, i*size)
		if size > 16 {
			copy(unsafe.Slice((*byte)(rec), size), fill)
		}
		*(*uint64)(rec) = first + uint64(i)
		if size > 8 {
			*(*uint64)(unsafe.Add(rec, size-8)) = ^(first + uint64(i))
		}
	}
}

// checkRecords checks the sequence numbers (and complements) of n records
// at p, numbered from first; it returns the first bad one.
func checkRecords(p unsafe.Pointer, n, size int, first uint64) (uint64, bool) {
	for i := range n {
		rec := unsafe.Add(p, i*size)
		seq := first + uint64(i)
		if *(*uint64)(rec) != seq || size > 8 && *(*uint64)(unsafe.Add(rec, size-8)) != ^seq {
			return seq, false
		}
	}
	return 0, true
}

func runChan[R any, P record[R]](c Config) (Result, error) {
	ch := make(chan R, ChanCapacity)
	produce := func() error {
		var rec R
		for s := range c.Records {
			P(&rec).set(s)
			ch <- rec
		}
		close(ch)
		return nil
	}
	consume := func() error {
		// NB: rec lives outside the loop; taking the address of a
		// per-iteration variable through a type parameter's method would
		// move it to the heap once per record.
		var rec R
		next := uint64(0)
		for ok := true; ; next++ {
			if rec, ok = <-ch; !ok {
				break
			}
			if !P(&rec).ok(next) {
				return corrupt(next)
			}
		}
		if next != c.Records {
			return fmt.Errorf("received %d records, want %d", next, c.Records)
		}
		return nil
	}
	return measure("chan", c, produce, consume)
}

func runChanBatched[R any, P record[R]](c Config) (Result, error) {
	ch := make(chan *[]R, BatchChanCapacity)
	pool := sync.Pool{New: func() any { b := make([]R, 0, c.Batch); return &b }}
	produce := func() error {
		for next := uint64(0); next < c.Records; {
			bp := pool.Get().(*[]R)
			b := (*bp)[:0]
			k := min(uint64(c.Batch), c.Records-next)
			b = b[:k]
			for i := range b {
				P(&b[i]).set(next + uint64(i))
			}
			next += k
			*bp = b
			ch <- bp
		}
		close(ch)
		return nil
	}
	consume := func() error {
		next := uint64(0)
		for bp := range ch {
			b := *bp
			for i := range b {
				if !P(&b[i]).ok(next) {
					return corrupt(next)
				}
				next++
			}
			pool.Put(bp)
		}
		if next != c.Records {
			return fmt.Errorf("received %d records, want %d", next, c.Records)
		}
		return nil
	}
	return measure("chan-batched", c, produce, consume)
}
