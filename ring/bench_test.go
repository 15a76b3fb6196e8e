package ring

import (
	"fmt"
	"runtime"
	"testing"
	"time"
	"unsafe"
)

// BenchmarkRing moves b.N records of a given size, in frames of a given
// number of records, from a producer goroutine to the benchmark goroutine,
// which checks each record's sequence number (first 8 bytes) and its
// complement (last 8 bytes). Each side locks its goroutine to a thread.
func BenchmarkRing(b *testing.B) {
	for _, size := range []int{8, 16, 64, 256} {
		for _, batch := range []int{1, 16, 256} {
			b.Run(fmt.Sprintf("record=%d/batch=%d", size, batch), func(b *testing.B) {
				benchRing(b, size, batch)
			})
		}
	}
}

func benchRing(b *testing.B, size, batch int) {
	r, err := New(Options{Capacity: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	n := uint64(b.N)
	deadline := time.Now().Add(10 * time.Minute)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		benchProduce(r.Writer(), n, size, batch, deadline)
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	rd := r.Reader()
	for next := uint64(0); next < n; {
		f, err := rd.Next()
		if err == ErrEmpty {
			if err := rd.Wait(deadline); err != nil {
				b.Fatal(err)
			}
			continue
		}
		if err != nil || f.Count*size != len(f.Payload) {
			b.Fatalf("frame: %v", err)
		}
		p := unsafe.Pointer(unsafe.SliceData(f.Payload))
		for i := 0; i < f.Count; i++ {
			rec := unsafe.Add(p, i*size)
			if *(*uint64)(rec) != next || (size > 8 && *(*uint64)(unsafe.Add(rec, size-8)) != ^next) {
				b.Fatalf("record %d corrupt", next)
			}
			next++
		}
		rd.Release(f)
	}
}

func benchProduce(w *Writer, n uint64, size, batch int, deadline time.Time) {
	fill := make([]byte, size)
	for i := range fill {
		fill[i] = byte(i)
	}
	flushAt := 64 << 10
	for next := uint64(0); next < n; {
		k := int(min(uint64(batch), n-next))
		p := w.ReservePointer(k * size)
		if p == nil {
			if w.Wait(k*size, deadline) != nil {
				return
			}
			continue
		}
		for i := 0; i < k; i++ {
			rec := unsafe.Add(p, i*size)
			if size > 16 {
				copy(unsafe.Slice((*byte)(rec), size), fill)
			}
			*(*uint64)(rec) = next
			if size > 8 {
				*(*uint64)(unsafe.Add(rec, size-8)) = ^next
			}
			next++
		}
		w.Commit(k*size, k)
		if w.Unflushed() >= flushAt {
			w.Flush()
		}
	}
	w.Flush()
}
