package snapshot

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// arenaChunkBytes is the size of the arena's chunks. A blob larger than a
// chunk gets a mapping of its own, returned to the system when its
// checkpoint ends.
const arenaChunkBytes = 4 << 20

// keepWindow is how many checkpoints the chunk pool remembers the size of.
const keepWindow = 16

// errArenaReleased is why a copy into the arena of an ended checkpoint
// fails.
var errArenaReleased = errors.New("snapshot: checkpoint already ended")

// arena holds the bytes of a pending checkpoint's blobs from Put until the
// checkpoint ends: in chunks of anonymous mmap memory, off the Go heap, and
// reused by the next checkpoint. A checkpoint at 1M keys buffers ~40 MB;
// on the Go heap that was garbage once per checkpoint, and the collection
// that followed took CPU from the job's workers. The arena produces no
// garbage at all.
//
// NB: a slice returned by copy is valid only until release; the store
// releases an arena when its checkpoint has committed (its sstable is
// written and closed) or failed, after dropping every entry that points
// into it.
type arena struct {
	pool *chunkPool
	// copying is held for reading by every copy into the arena and for
	// writing by release, so no chunk is handed back while a copy (which
	// runs outside the Pending's lock) is still writing into it.
	copying sync.RWMutex
	mu      struct {
		sync.Mutex
		released bool
		chunks   [][]byte // standard chunks, from the pool
		large    [][]byte // mappings of single blobs larger than a chunk
		free     []byte   // the unused tail of the last chunk
	}
}

func newArena(pool *chunkPool) *arena { return &arena{pool: pool} }

// copy returns a copy of data that lives in the arena, and its checksum.
//
// NB: the checksum is taken from the copy inside the read lock: once the
// lock is dropped the checkpoint may end and its chunks be unmapped or
// reused, and only then can the caller learn (from the Pending's lock)
// that its entry was not added.
func (a *arena) copy(data []byte) ([]byte, uint64, error) {
	a.copying.RLock()
	defer a.copying.RUnlock()
	dst, err := a.alloc(len(data))
	if err != nil {
		return nil, 0, err
	}
	copy(dst, data)
	return dst, checksum(dst), nil
}

// alloc reserves n bytes. The caller must hold a.copying for reading.
func (a *arena) alloc(n int) ([]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.released {
		return nil, errArenaReleased
	}
	if n > arenaChunkBytes {
		mem, err := mmapAnon(n)
		if err != nil {
			return nil, err
		}
		a.mu.large = append(a.mu.large, mem)
		return mem[:n:n], nil
	}
	if len(a.mu.free) < n {
		c, err := a.pool.get()
		if err != nil {
			return nil, err
		}
		a.mu.chunks = append(a.mu.chunks, c)
		a.mu.free = c
	}
	dst := a.mu.free[:n:n]
	a.mu.free = a.mu.free[n:]
	return dst, nil
}

// release returns the arena's memory; later copies fail. It waits for
// copies in progress. Calling it again is a no-op.
func (a *arena) release() {
	a.copying.Lock()
	defer a.copying.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.released {
		return
	}
	a.mu.released = true
	for _, mem := range a.mu.large {
		munmap(mem)
	}
	a.pool.put(a.mu.chunks)
	a.mu.chunks, a.mu.large, a.mu.free = nil, nil, nil
}

// chunkPool keeps arena chunks between checkpoints: as many free chunks
// as the largest of the last keepWindow arenas returned, so that the
// periodic larger checkpoints (full blobs after a run of deltas) find
// their chunks mapped and their pages in place — a fresh chunk costs a
// page fault per 4 KiB on the worker that copies into it — while a past
// peak is let go once keepWindow smaller checkpoints have passed.
type chunkPool struct {
	mu     sync.Mutex
	free   [][]byte
	keep   int             // free chunks kept at most
	mapped int             // chunks mapped, free or in use
	maps   int             // chunks mapped since the pool was made (for tests)
	recent [keepWindow]int // chunks of the last arenas returned, round robin
	next   int
	closed bool
	// noReuse, set by tests, unmaps every chunk handed back, so that a
	// use after release faults instead of reading another checkpoint's
	// bytes.
	noReuse bool
}

func (cp *chunkPool) get() ([]byte, error) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if n := len(cp.free); n > 0 {
		c := cp.free[n-1]
		cp.free[n-1] = nil
		cp.free = cp.free[:n-1]
		return c, nil
	}
	c, err := mmapAnon(arenaChunkBytes)
	if err != nil {
		return nil, err
	}
	cp.mapped++
	cp.maps++
	return c, nil
}

// put takes back the chunks of an arena.
func (cp *chunkPool) put(chunks [][]byte) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.free = append(cp.free, chunks...)
	cp.recent[cp.next%keepWindow] = len(chunks)
	cp.next++
	cp.keep = slices.Max(cp.recent[:])
	if cp.closed || cp.noReuse {
		cp.keep = 0
	}
	for len(cp.free) > cp.keep {
		n := len(cp.free)
		munmap(cp.free[n-1])
		cp.free[n-1] = nil
		cp.free = cp.free[:n-1]
		cp.mapped--
	}
}

// close unmaps the free chunks; chunks still in use are unmapped when
// their arena is released.
func (cp *chunkPool) close() {
	cp.mu.Lock()
	cp.closed = true
	cp.mu.Unlock()
	cp.put(nil)
}

// inUse returns the number of chunks mapped and not free (for tests).
func (cp *chunkPool) inUse() int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.mapped - len(cp.free)
}

func mmapAnon(n int) ([]byte, error) {
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("snapshot: map %d bytes for checkpoint blobs: %w", n, err)
	}
	return mem, nil
}

func munmap(mem []byte) {
	// NB: munmap fails only for an invalid range, which would be a bug
	// here; the memory is lost either way, so it is not worth a failure.
	_ = unix.Munmap(mem)
}
