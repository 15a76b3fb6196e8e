package snapshot

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"sort"

	"github.com/cespare/xxhash/v2"
)

// Meta is the job metadata stored in a checkpoint's manifest.
type Meta struct {
	// MaxParallelism is the number of key groups, in [1, MaxParallelismLimit].
	MaxParallelism int
	// Parallelism maps every operator with an entry in the checkpoint to its
	// parallelism when the checkpoint was taken.
	Parallelism map[string]int
	// States lists every piece of state the job declared when the
	// checkpoint was taken, empty ones included, sorted by operator and
	// state. A checkpoint of format version 1 has none recorded:
	// StatesRecorded is false.
	States         []StateInfo
	StatesRecorded bool
	// Run numbers the runs of a job on one state directory (a job run
	// again from scratch after it finished starts a new one); Final says
	// the checkpoint is the last of a run that read all its input. Both
	// are 0 in format version 1.
	Run   uint64
	Final bool
	// Job is the job's own record of itself, opaque to the store (a
	// distributed job's layout, say); nil for none. At most
	// JobMetaMaxBytes.
	Job []byte
}

// JobMetaMaxBytes bounds Meta.Job.
const JobMetaMaxBytes = 1 << 16

// StateInfo is one piece of state a job declares: its operator, its name
// within the operator, and the layout of its type (a description precise
// enough that a different layout means different bytes).
type StateInfo struct {
	Operator, State, Layout string
}

func (m Meta) clone() Meta {
	c := Meta{MaxParallelism: m.MaxParallelism, Parallelism: make(map[string]int, len(m.Parallelism)),
		States: slices.Clone(m.States), StatesRecorded: m.StatesRecorded, Run: m.Run, Final: m.Final,
		Job: slices.Clone(m.Job)}
	for op, p := range m.Parallelism {
		c.Parallelism[op] = p
	}
	return c
}

// stateLayoutMax bounds a state's layout description, and stateNameMax its
// operator's and its own name.
const (
	stateLayoutMax = 1 << 16
	stateNameMax   = OperatorIDMaxLen
)

func compareStates(a, b StateInfo) int {
	return cmp.Or(cmp.Compare(a.Operator, b.Operator), cmp.Compare(a.State, b.State))
}

// manifest is the decoded form of a checkpoint's manifest.
type manifest struct {
	id      uint64
	meta    Meta
	entries []manifestEntry // strictly increasing by encoded entry key
	// assembled says the manifest is an Assembly's, never stored: an
	// operator's subtasks may be those of several jobs together, beyond
	// maxParallelism (up to MaxParallelismLimit).
	assembled bool
}

// manifestEntry records where an entry's bytes live and how to check them.
type manifestEntry struct {
	key      entryKey
	origin   uint64 // id of the checkpoint that wrote the blob; <= manifest id
	length   uint64
	checksum uint64 // xxhash64 of the blob bytes
}

func (e manifestEntry) blobKey() []byte { return blobKey(e.origin, e.key) }

const (
	manifestMagic      = "RFCM"
	manifestVersion    = 2
	manifestHeaderLen  = 20
	manifestTrailerLen = 8
	entryFixedLen      = entryKeyFixedLen + 8 + 8 + 8
)

// manifestErrorf reports a stored manifest that fails to decode; the error
// wraps ErrCorrupt.
func manifestErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// invalidf reports a manifest that breaks a rule of validate: bad input at
// Commit, corruption (once wrapped by decodeManifest) when read back.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("invalid checkpoint: %s", fmt.Sprintf(format, args...))
}

func checksum(b []byte) uint64 { return xxhash.Sum64(b) }

// chain returns the entries of key group k (whose b must be 0): its base
// and deltas, in order; empty if the manifest has none.
func (m *manifest) chain(k entryKey) []manifestEntry {
	i := sort.Search(len(m.entries), func(i int) bool {
		return compareEntryKeys(m.entries[i].key, k) >= 0
	})
	j := i
	for j < len(m.entries) && m.entries[j].key.kind == k.kind && m.entries[j].key.op == k.op &&
		m.entries[j].key.a == k.a {
		j++
	}
	return m.entries[i:j]
}

// validate checks everything a manifest promises about itself. It runs
// before a manifest is encoded and after one is decoded (a pair assertion
// on the durability boundary).
func (m *manifest) validate() error {
	if m.id == 0 {
		return invalidf("checkpoint id 0")
	}
	if m.meta.MaxParallelism < 1 || m.meta.MaxParallelism > MaxParallelismLimit {
		return invalidf("maxParallelism %d outside [1, %d]", m.meta.MaxParallelism, MaxParallelismLimit)
	}
	for op, p := range m.meta.Parallelism {
		if err := checkOperatorID(op); err != nil {
			return invalidf("job metadata: %v", err)
		}
		if limit := m.meta.MaxParallelism; p < 1 || p > limit && (!m.assembled || p > MaxParallelismLimit) {
			return invalidf("operator %q has parallelism %d outside [1, maxParallelism %d]",
				op, p, m.meta.MaxParallelism)
		}
	}
	for i, st := range m.meta.States {
		switch {
		case st.Operator == "" || st.State == "" || len(st.Operator) > stateNameMax || len(st.State) > stateNameMax:
			return invalidf("declared state %q of operator %q: names must have 1 to %d bytes", st.State, st.Operator, stateNameMax)
		case len(st.Layout) > stateLayoutMax:
			return invalidf("declared state %q of operator %q: layout of %d bytes, more than %d", st.State, st.Operator,
				len(st.Layout), stateLayoutMax)
		case i > 0 && compareStates(m.meta.States[i-1], st) >= 0:
			return invalidf("declared states out of order or duplicated at %q of operator %q", st.State, st.Operator)
		}
	}
	if len(m.meta.Job) > JobMetaMaxBytes {
		return invalidf("job metadata of %d bytes, more than %d", len(m.meta.Job), JobMetaMaxBytes)
	}
	if len(m.entries) > entriesMax {
		return invalidf("%d entries, more than %d", len(m.entries), entriesMax)
	}
	// Entries of one operator are adjacent: its id is checked once per run.
	var op string
	par := 0
	for i, e := range m.entries {
		if i > 0 && compareEntryKeys(m.entries[i-1].key, e.key) >= 0 {
			return invalidf("entries out of order or duplicated at %s", e.key)
		}
		if i == 0 || e.key.op != op {
			var err error
			if par, err = m.operator(e.key); err != nil {
				return err
			}
			op = e.key.op
		}
		if err := m.validateEntry(e, par); err != nil {
			return err
		}
		// A delta follows its base and every earlier delta of its chain.
		if e.key.kind == KindKeyGroup && e.key.b > 0 {
			prev := e.key
			prev.b--
			if i == 0 || m.entries[i-1].key != prev {
				return invalidf("%s without %s before it", e.key, prev)
			}
		}
	}
	return nil
}

// sortEntries sorts entries by key (compareEntryKeys). It compares packed
// integers instead of keys: operator ids are ranked once (a job has a few),
// then each entry is (kind, id rank) and (a, b). Sorting the 56-byte
// entries themselves, through their encodings, was most of the 600µs a
// manifest of 1,150 entries took to build on a worker's thread; build now
// takes ~400µs, in pieces (see Pending.build).
func sortEntries(entries []manifestEntry) {
	var ops []string // the operator ids, in entry-key order
	for _, e := range entries {
		if !slices.Contains(ops, e.key.op) {
			ops = append(ops, e.key.op)
		}
	}
	slices.SortFunc(ops, func(x, y string) int {
		return compareEntryKeys(entryKey{op: x}, entryKey{op: y})
	})
	type packed struct {
		hi, lo uint64 // kind and id rank; a and b
		i      int
	}
	keys := make([]packed, len(entries))
	for i, e := range entries {
		rank := slices.Index(ops, e.key.op)
		keys[i] = packed{hi: uint64(e.key.kind)<<32 | uint64(rank), lo: uint64(e.key.a)<<32 | uint64(e.key.b), i: i}
	}
	slices.SortFunc(keys, func(x, y packed) int {
		return cmp.Or(cmp.Compare(x.hi, y.hi), cmp.Compare(x.lo, y.lo))
	})
	sorted := make([]manifestEntry, len(entries))
	for i, k := range keys {
		sorted[i] = entries[k.i]
	}
	copy(entries, sorted)
}

// operator checks the operator id of entry key k and returns the
// operator's parallelism.
func (m *manifest) operator(k entryKey) (int, error) {
	if err := checkOperatorID(k.op); err != nil {
		return 0, invalidf("%s: %v", k, err)
	}
	p, ok := m.meta.Parallelism[k.op]
	if !ok {
		return 0, invalidf("%s: operator not in job metadata", k)
	}
	return p, nil
}

// validateEntry checks entry e, whose operator (see operator) has
// parallelism p.
func (m *manifest) validateEntry(e manifestEntry, p int) error {
	k := e.key
	if !k.kind.valid() {
		return invalidf("entry with unknown kind %d", uint8(k.kind))
	}
	switch {
	case k.kind == KindKeyGroup && int64(k.a) >= int64(m.meta.MaxParallelism):
		return invalidf("%s: key group not below maxParallelism %d", k, m.meta.MaxParallelism)
	case k.kind != KindKeyGroup && int64(k.a) >= int64(p):
		return invalidf("%s: subtask not below parallelism %d", k, p)
	case k.kind == KindKeyGroup && k.b > DeltaChainMax:
		return invalidf("%s: chain longer than %d deltas", k, DeltaChainMax)
	case k.kind != KindChannelState && k.kind != KindKeyGroup && k.b != 0:
		return invalidf("%s: channel %d set on a kind without channels", k, k.b)
	case e.origin == 0 || e.origin > m.id:
		return invalidf("%s: origin checkpoint %d not in [1, %d]", k, e.origin, m.id)
	case e.length > BlobMaxBytes:
		return invalidf("%s: length %d above %d", k, e.length, BlobMaxBytes)
	}
	return nil
}

// encode returns the manifest's bytes; see doc.go for the layout.
func (m *manifest) encode() []byte {
	ops := make([]string, 0, len(m.meta.Parallelism))
	for op := range m.meta.Parallelism {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	size := manifestHeaderLen + 4 + 4 + manifestTrailerLen
	for _, op := range ops {
		size += 1 + len(op) + 4
	}
	for _, e := range m.entries {
		size += entryFixedLen + len(e.key.op)
	}
	size += 4 + 8 + 4 + 4 + len(m.meta.Job)
	for _, st := range m.meta.States {
		size += 12 + len(st.Operator) + len(st.State) + len(st.Layout)
	}
	b := make([]byte, 0, size)
	b = append(b, manifestMagic...)
	b = binary.LittleEndian.AppendUint16(b, manifestVersion)
	b = binary.LittleEndian.AppendUint16(b, 0 /* reserved */)
	b = binary.LittleEndian.AppendUint64(b, m.id)
	b = binary.LittleEndian.AppendUint32(b, uint32(m.meta.MaxParallelism))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(ops)))
	for _, op := range ops {
		b = append(b, byte(len(op)))
		b = append(b, op...)
		b = binary.LittleEndian.AppendUint32(b, uint32(m.meta.Parallelism[op]))
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(m.entries)))
	for _, e := range m.entries {
		b = appendEntryKey(b, e.key)
		b = binary.LittleEndian.AppendUint64(b, e.origin)
		b = binary.LittleEndian.AppendUint64(b, e.length)
		b = binary.LittleEndian.AppendUint64(b, e.checksum)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(m.meta.States)))
	for _, st := range m.meta.States {
		for _, f := range []string{st.Operator, st.State, st.Layout} {
			b = binary.LittleEndian.AppendUint32(b, uint32(len(f)))
			b = append(b, f...)
		}
	}
	b = binary.LittleEndian.AppendUint64(b, m.meta.Run)
	var flags uint32
	if m.meta.Final {
		flags |= flagFinal
	}
	if m.meta.Job != nil {
		flags |= flagJob
	}
	b = binary.LittleEndian.AppendUint32(b, flags)
	if m.meta.Job != nil {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(m.meta.Job)))
		b = append(b, m.meta.Job...)
	}
	return binary.LittleEndian.AppendUint64(b, checksum(b))
}

// decodeManifest parses and validates a manifest. Every length it reads is
// checked against the bytes that remain, so bad input yields an error that
// wraps ErrCorrupt, never a panic.
func decodeManifest(b []byte) (*manifest, error) {
	if len(b) < manifestHeaderLen+4+4+manifestTrailerLen {
		return nil, manifestErrorf("truncated: %d bytes", len(b))
	}
	body, trailer := b[:len(b)-manifestTrailerLen], b[len(b)-manifestTrailerLen:]
	if want, got := binary.LittleEndian.Uint64(trailer), checksum(body); want != got {
		return nil, manifestErrorf("checksum mismatch: stored %#016x, computed %#016x", want, got)
	}
	if string(body[:4]) != manifestMagic {
		return nil, manifestErrorf("bad magic %q", body[:4])
	}
	v := binary.LittleEndian.Uint16(body[4:])
	if v != manifestVersion && v != 1 {
		return nil, manifestErrorf("unsupported format version %d (want 1 or %d)", v, manifestVersion)
	}
	m := &manifest{id: binary.LittleEndian.Uint64(body[8:])}
	m.meta.MaxParallelism = int(binary.LittleEndian.Uint32(body[16:]))
	r := reader{b: body[manifestHeaderLen:]}
	if err := m.decodeOperators(&r); err != nil {
		return nil, err
	}
	if err := m.decodeEntries(&r); err != nil {
		return nil, err
	}
	if v >= 2 {
		if err := m.decodeStates(&r); err != nil {
			return nil, err
		}
	}
	if len(r.b) != 0 {
		return nil, manifestErrorf("%d trailing bytes", len(r.b))
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return m, nil
}

func (m *manifest) decodeOperators(r *reader) error {
	n := r.u32()
	if r.err == nil && uint64(n)*5 > uint64(len(r.b)) {
		return manifestErrorf("operator count %d exceeds the remaining %d bytes", n, len(r.b))
	}
	m.meta.Parallelism = make(map[string]int, n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		op := string(r.bytes(int(r.u8())))
		p := r.u32()
		if _, dup := m.meta.Parallelism[op]; dup && r.err == nil {
			return manifestErrorf("operator %q listed twice", op)
		}
		m.meta.Parallelism[op] = int(p)
	}
	return r.err
}

func (m *manifest) decodeEntries(r *reader) error {
	n := r.u32()
	if r.err == nil && uint64(n)*entryFixedLen > uint64(len(r.b)) {
		return manifestErrorf("entry count %d exceeds the remaining %d bytes", n, len(r.b))
	}
	m.entries = make([]manifestEntry, 0, n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		kind, opLen := r.u8(), r.u8()
		e := manifestEntry{key: entryKey{kind: Kind(kind), op: string(r.bytes(int(opLen)))}}
		e.key.a, e.key.b = r.u32be(), r.u32be()
		e.origin, e.length, e.checksum = r.u64(), r.u64(), r.u64()
		m.entries = append(m.entries, e)
	}
	return r.err
}

func (m *manifest) decodeStates(r *reader) error {
	n := r.u32()
	if r.err == nil && uint64(n)*12 > uint64(len(r.b)) {
		return manifestErrorf("declared state count %d exceeds the remaining %d bytes", n, len(r.b))
	}
	m.meta.States, m.meta.StatesRecorded = make([]StateInfo, 0, n), true
	for i := uint32(0); i < n && r.err == nil; i++ {
		var f [3]string
		for j := range f {
			f[j] = string(r.bytes(int(r.u32())))
		}
		m.meta.States = append(m.meta.States, StateInfo{Operator: f[0], State: f[1], Layout: f[2]})
	}
	m.meta.Run = r.u64()
	flags := r.u32()
	if flags&^(flagFinal|flagJob) != 0 && r.err == nil {
		return manifestErrorf("unknown flags %#x", flags)
	}
	m.meta.Final = flags&flagFinal != 0
	if flags&flagJob != 0 {
		n := r.u32()
		if r.err == nil && n > JobMetaMaxBytes {
			return manifestErrorf("job metadata of %d bytes, more than %d", n, JobMetaMaxBytes)
		}
		m.meta.Job = slices.Clone(r.bytes(int(n)))
		if m.meta.Job == nil && r.err == nil {
			m.meta.Job = []byte{}
		}
	}
	return r.err
}

// Manifest flags (version 2 on): flagJob says Meta.Job follows them.
const (
	flagFinal = 1 << 0
	flagJob   = 1 << 1
)

// reader consumes a byte slice; the first short read sets err and every
// later read returns zeroes.
type reader struct {
	b   []byte
	err error
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b) {
		r.err = manifestErrorf("truncated: want %d more bytes, have %d", n, len(r.b))
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8() uint8 {
	if v := r.bytes(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *reader) u32() uint32 {
	if v := r.bytes(4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

func (r *reader) u32be() uint32 {
	if v := r.bytes(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if v := r.bytes(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}
