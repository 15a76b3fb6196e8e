package ring

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Layout constants; see the package documentation for the drawing.
const (
	// HeaderSize is the size of the header page in front of the data region.
	HeaderSize = 4096

	magic         = uint64(0x01574c46474e4952) // "RINGFLW\x01" little endian
	layoutVersion = uint32(1)

	offMagic      = 0
	offVersion    = 8
	offHeaderSize = 12
	offCapacity   = 16
	offReserve    = 24
	offProducer   = 128
	offConsumer   = 256
	offConsParked = 384
	offProdParked = 512
	// NB: the limit word was added after layout version 1 was in use, into
	// header space that was zero; zero means no limit, so ring files made
	// before it read as unlimited and the version stays 1.
	offLimit = 640

	// MinCapacity and MaxCapacity bound the data region.
	MinCapacity = 1 << 10
	MaxCapacity = 1 << 30
)

// Errors callers may branch on.
var (
	// ErrCorrupt is wrapped by every error about ring memory that does not
	// hold what the protocol says it must.
	ErrCorrupt = errors.New("ring: corrupt")
	// ErrNotRing is wrapped by Open's errors for files that are not rings.
	ErrNotRing = errors.New("ring: not a ring file")
	// ErrClosed is returned by operations on a closed ring.
	ErrClosed = errors.New("ring: closed")
)

// Ring is one single-producer, single-consumer ring. Its memory is a mapping
// that may be shared with another process. Use Writer on the producing side
// and Reader on the consuming side; each must be used by one goroutine at a
// time.
type Ring struct {
	mem      []byte         // the whole mapping: header page + data region
	data     unsafe.Pointer // start of the data region
	mask     uint64
	capacity uint64
	reserve  uint64
	path     string // file backing the ring, removed on Close; "" if anonymous
	owner    bool   // created (not opened) by this process

	prodPos    *atomic.Uint64
	consPos    *atomic.Uint64
	consParked *atomic.Uint32
	prodParked *atomic.Uint32
	limit      *atomic.Uint64

	// Wakers replace the futex wake-up for rings used inside one process.
	consWaker Waker
	prodWaker Waker

	closed atomic.Bool
	// NB: the writer's and the reader's private state live on their own
	// 128-byte lines: they are written on every frame by different threads.
	_ [128]byte
	w Writer
	_ [128]byte
	r Reader
	_ [128]byte
}

// Waker is called by one side of a ring to wake the other side after that
// side announced in its parked word that it sleeps. It lets one thread sleep
// on many rings: the thread sets the parked word of each ring it waits on,
// then sleeps on something of its own that its Wakers signal.
type Waker interface {
	Wake()
}

// Options configure a new ring.
type Options struct {
	// Capacity of the data region in bytes; a power of two in
	// [MinCapacity, MaxCapacity]. Default 1 MiB.
	Capacity int
	// Reserve is the control reserve in bytes: the part of the free space
	// that only BARRIER frames may use. Default: room for two barriers and a
	// wrap.
	Reserve int
}

const defaultCapacity = 1 << 20

// DefaultReserve is the control reserve used when Options.Reserve is zero:
// two barrier frames, each possibly preceded by a pad as large as itself.
const DefaultReserve = 4 * barrierFrameSize

func (o Options) withDefaults() (Options, error) {
	if o.Capacity == 0 {
		o.Capacity = defaultCapacity
	}
	if o.Reserve == 0 {
		o.Reserve = DefaultReserve
	}
	if err := checkCapacity(uint64(o.Capacity)); err != nil {
		return o, err
	}
	if o.Reserve < 2*barrierFrameSize || o.Reserve > o.Capacity/4 || o.Reserve%8 != 0 {
		return o, fmt.Errorf("ring: control reserve %d must be a multiple of 8 in [%d, capacity/4 = %d]",
			o.Reserve, 2*barrierFrameSize, o.Capacity/4)
	}
	return o, nil
}

func checkCapacity(c uint64) error {
	if c < MinCapacity || c > MaxCapacity || bits.OnesCount64(c) != 1 {
		return fmt.Errorf("ring: capacity %d is not a power of two in [%d, %d]", c, MinCapacity, MaxCapacity)
	}
	return nil
}

// New makes a ring in anonymous shared memory, for use inside this process.
func New(opts Options) (*Ring, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	size := HeaderSize + opts.Capacity
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_SHARED|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("ring: mmap %d bytes: %w", size, err)
	}
	initHeader(mem, opts)
	return attach(mem, "", true)
}

// Create makes a ring backed by the file at path (normally under /dev/shm),
// which another process can attach to with Open. The file must not exist.
// Close unmaps the ring and removes the file.
func Create(path string, opts Options) (*Ring, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("ring: create: %w", err)
	}
	defer f.Close()
	size := HeaderSize + opts.Capacity
	if err := f.Truncate(int64(size)); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("ring: create %s: size to %d bytes: %w", path, size, err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("ring: create %s: mmap: %w", path, err)
	}
	initHeader(mem, opts)
	return attach(mem, path, true)
}

// Open attaches to a ring file made by Create, possibly in another process.
// It checks that the file is a ring of a layout this package understands.
// Close unmaps the ring but leaves the file to its creator.
func Open(path string) (*Ring, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("ring: open: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("ring: open %s: %w", path, err)
	}
	if st.Size() < HeaderSize {
		return nil, fmt.Errorf("%w: %s: %d bytes is smaller than the %d-byte header",
			ErrNotRing, path, st.Size(), HeaderSize)
	}
	var hdr [HeaderSize]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return nil, fmt.Errorf("ring: open %s: read header: %w", path, err)
	}
	if err := validateHeader(hdr[:], st.Size()); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNotRing, path, err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("ring: open %s: mmap: %w", path, err)
	}
	// NB: the header is validated again on the mapping, in case the file
	// changed between the read and the mmap.
	if err := validateHeader(mem, st.Size()); err != nil {
		unix.Munmap(mem)
		return nil, fmt.Errorf("%w: %s: %v", ErrNotRing, path, err)
	}
	r, err := attach(mem, path, false)
	if err != nil {
		unix.Munmap(mem)
	}
	return r, err
}

func initHeader(mem []byte, opts Options) {
	binary.LittleEndian.PutUint64(mem[offMagic:], magic)
	binary.LittleEndian.PutUint32(mem[offVersion:], layoutVersion)
	binary.LittleEndian.PutUint32(mem[offHeaderSize:], HeaderSize)
	binary.LittleEndian.PutUint64(mem[offCapacity:], uint64(opts.Capacity))
	binary.LittleEndian.PutUint64(mem[offReserve:], uint64(opts.Reserve))
}

func validateHeader(hdr []byte, fileSize int64) error {
	if m := binary.LittleEndian.Uint64(hdr[offMagic:]); m != magic {
		return fmt.Errorf("bad magic %#016x, want %#016x", m, magic)
	}
	if v := binary.LittleEndian.Uint32(hdr[offVersion:]); v != layoutVersion {
		return fmt.Errorf("unknown layout version %d, this build reads version %d", v, layoutVersion)
	}
	if h := binary.LittleEndian.Uint32(hdr[offHeaderSize:]); h != HeaderSize {
		return fmt.Errorf("header size %d, want %d", h, HeaderSize)
	}
	c := binary.LittleEndian.Uint64(hdr[offCapacity:])
	if err := checkCapacity(c); err != nil {
		return err
	}
	if want := int64(HeaderSize + c); fileSize != want {
		return fmt.Errorf("file is %d bytes but the header says %d (header %d + capacity %d)",
			fileSize, want, HeaderSize, c)
	}
	res := binary.LittleEndian.Uint64(hdr[offReserve:])
	if res < 2*barrierFrameSize || res > c/4 || res%8 != 0 {
		return fmt.Errorf("control reserve %d out of range for capacity %d", res, c)
	}
	if l := binary.LittleEndian.Uint64(hdr[offLimit:]); l != 0 && (l < MinLimit || l > c-res || l%8 != 0) {
		return fmt.Errorf("consumer limit %d is neither 0 (none) nor a multiple of 8 in [MinLimit %d, capacity - reserve = %d]",
			l, MinLimit, c-res)
	}
	return nil
}

func attach(mem []byte, path string, owner bool) (*Ring, error) {
	capacity := binary.LittleEndian.Uint64(mem[offCapacity:])
	r := &Ring{
		mem:        mem,
		data:       unsafe.Pointer(&mem[HeaderSize]),
		mask:       capacity - 1,
		capacity:   capacity,
		reserve:    binary.LittleEndian.Uint64(mem[offReserve:]),
		path:       path,
		owner:      owner,
		prodPos:    (*atomic.Uint64)(unsafe.Pointer(&mem[offProducer])),
		consPos:    (*atomic.Uint64)(unsafe.Pointer(&mem[offConsumer])),
		consParked: (*atomic.Uint32)(unsafe.Pointer(&mem[offConsParked])),
		prodParked: (*atomic.Uint32)(unsafe.Pointer(&mem[offProdParked])),
		limit:      (*atomic.Uint64)(unsafe.Pointer(&mem[offLimit])),
	}
	prod, cons := r.prodPos.Load(), r.consPos.Load()
	if prod < cons || prod-cons > capacity || prod%8 != 0 || cons%8 != 0 {
		return nil, fmt.Errorf("%w: positions producer=%d consumer=%d do not fit capacity %d",
			ErrCorrupt, prod, cons, capacity)
	}
	limit := r.limitOf(r.limit.Load())
	r.w = Writer{r: r, pos: prod, published: prod, cachedCons: cons, maxPayload: FramePayloadFor(int(r.capacity - r.reserve))}
	r.w.loadLimit()
	r.r = Reader{r: r, pos: cons, released: cons, published: cons, cachedProd: prod,
		limit: limit, publishEvery: r.publishEvery(limit)}
	return r, nil
}

// Capacity returns the size of the data region in bytes.
func (r *Ring) Capacity() int { return int(r.capacity) }

// Reserve returns the control reserve in bytes.
func (r *Ring) Reserve() int { return int(r.reserve) }

// Path returns the file backing the ring, or "" for an anonymous ring.
func (r *Ring) Path() string { return r.path }

// Writer returns the ring's producing side. There is one per Ring; it must
// be used by one goroutine at a time.
func (r *Ring) Writer() *Writer { return &r.w }

// Reader returns the ring's consuming side. There is one per Ring; it must
// be used by one goroutine at a time.
func (r *Ring) Reader() *Reader { return &r.r }

// SetWakers makes wake-ups of a parked consumer call consumer.Wake and those
// of a parked producer call producer.Wake, instead of the futex on the
// parked word. Either may be nil to keep the futex. Only meaningful for
// rings whose two sides live in this process; call it before use.
func (r *Ring) SetWakers(consumer, producer Waker) {
	r.consWaker, r.prodWaker = consumer, producer
}

// Len returns the number of bytes published and not yet released: a
// snapshot that may be stale by the time it returns.
func (r *Ring) Len() int {
	return int(r.prodPos.Load() - r.consPos.Load())
}

// Close unmaps the ring; the creator of a file-backed ring also removes the
// file. Neither side may be used afterwards.
func (r *Ring) Close() error {
	if r.closed.Swap(true) {
		return ErrClosed
	}
	var err error
	if e := unix.Munmap(r.mem); e != nil {
		err = fmt.Errorf("ring: munmap: %w", e)
	}
	if r.owner && r.path != "" {
		if e := os.Remove(r.path); e != nil && err == nil {
			err = fmt.Errorf("ring: remove %s: %w", r.path, e)
		}
	}
	r.mem, r.data = nil, nil
	return err
}

// at returns a pointer to the data-region byte at index i (already masked).
func (r *Ring) at(i uint64) unsafe.Pointer { return unsafe.Add(r.data, i) }

// slice returns n bytes of the data region starting at index i; the caller
// guarantees i+n <= capacity.
func (r *Ring) slice(i, n uint64) []byte {
	return unsafe.Slice((*byte)(r.at(i)), n)
}
