package ringbench

import "fmt"

// The record types, one per size. Each has its sequence number first and
// its complement last (except rec8, which is only the sequence number).
type (
	rec8  struct{ seq uint64 }
	rec16 struct{ seq, tail uint64 }
	rec32 struct {
		seq  uint64
		fill [16]byte
		tail uint64
	}
	rec64 struct {
		seq  uint64
		fill [48]byte
		tail uint64
	}
	rec128 struct {
		seq  uint64
		fill [112]byte
		tail uint64
	}
	rec256 struct {
		seq  uint64
		fill [240]byte
		tail uint64
	}
)

// record is the set of operations a transport needs on a record type.
type record[R any] interface {
	*R
	set(seq uint64)
	ok(seq uint64) bool
}

var (
	fill16  [16]byte
	fill48  [48]byte
	fill112 [112]byte
	fill240 [240]byte
)

func init() {
	for _, f := range [][]byte{fill16[:], fill48[:], fill112[:], fill240[:]} {
		for i := range f {
			f[i] = byte(i*7 + 1)
		}
	}
}

func (r *rec8) set(s uint64)       { r.seq = s }
func (r *rec8) ok(s uint64) bool   { return r.seq == s }
func (r *rec16) set(s uint64)      { r.seq, r.tail = s, ^s }
func (r *rec16) ok(s uint64) bool  { return r.seq == s && r.tail == ^s }
func (r *rec32) set(s uint64)      { r.seq, r.fill, r.tail = s, fill16, ^s }
func (r *rec32) ok(s uint64) bool  { return r.seq == s && r.tail == ^s }
func (r *rec64) set(s uint64)      { r.seq, r.fill, r.tail = s, fill48, ^s }
func (r *rec64) ok(s uint64) bool  { return r.seq == s && r.tail == ^s }
func (r *rec128) set(s uint64)     { r.seq, r.fill, r.tail = s, fill112, ^s }
func (r *rec128) ok(s uint64) bool { return r.seq == s && r.tail == ^s }
func (r *rec256) set(s uint64)     { r.seq, r.fill, r.tail = s, fill240, ^s }
func (r *rec256) ok(s uint64) bool { return r.seq == s && r.tail == ^s }

// kinds maps a record size to the runner for that record type.
var kinds = map[int]func(name string, c Config) (Result, error){
	8:   runKind[rec8],
	16:  runKind[rec16],
	32:  runKind[rec32],
	64:  runKind[rec64],
	128: runKind[rec128],
	256: runKind[rec256],
}

func runKind[R any, P record[R]](name string, c Config) (Result, error) {
	switch name {
	case "ring":
		return runRing[R, P](c)
	case "chan":
		return runChan[R, P](c)
	case "chan-batched":
		return runChanBatched[R, P](c)
	}
	return Result{}, fmt.Errorf("unknown transport %q", name)
}

func corrupt(seq uint64) error {
	return fmt.Errorf("record %d arrived corrupt, out of order, lost or duplicated", seq)
}
