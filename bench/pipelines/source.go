package pipelines

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// genSource is one instance of a source: it generates records sub,
// sub+par, sub+2·par, ... of gen, below a bound or without end, as fast as
// asked or paced to a rate. The baseline calls next; ringflow runs it as an
// operator.Source through engineSource. Both thus produce the same records
// at the same cost.
type genSource struct {
	gen      gen
	sub, par uint64
	bounded  bool
	limit    uint64  // records to generate, if bounded
	rate     float64 // records per second, 0: unpaced
	start    time.Time
	emitted  uint64 // records generated
	base     uint64 // emitted when pacing started
	produced *atomic.Uint64
}

// sourceSpec says what every instance of one source generates.
type sourceSpec struct {
	gen     gen
	records uint64  // in all instances; 0: unbounded
	rate    float64 // in all instances
}

// specOf returns the spec of the source with the given seed.
func specOf(c Config, seed uint64) sourceSpec {
	s := sourceSpec{gen: sourceGen(c, seed), records: c.Records, rate: c.Rate}
	if c.Pipeline == "join" {
		s.records, s.rate = c.Records/2, c.Rate/2
		if seed == seedMain {
			s.records += c.Records % 2
		}
	}
	return s
}

// sourceGen returns the generator of the source with the given seed.
func sourceGen(c Config, seed uint64) gen {
	every := c.SampleEvery
	if every == 0 {
		every = DefaultSampleEvery
	}
	return gen{keys: c.Keys, seed: seed, hot: c.HotKeys, sampleMask: every - 1}
}

// init prepares instance sub of par to generate from the emitted'th of its
// records on.
func (s *genSource) init(spec sourceSpec, sub, par int, emitted uint64, produced *atomic.Uint64) {
	*s = genSource{gen: spec.gen, sub: uint64(sub), par: uint64(par), bounded: spec.records > 0,
		rate: spec.rate / float64(par), emitted: emitted, base: emitted, produced: produced}
	if s.bounded {
		// Sequence numbers below records that are ≡ sub (mod par).
		s.limit = (spec.records + s.par - 1 - s.sub) / s.par
	}
}

// exhausted reports whether a bounded source has generated every record.
func (s *genSource) exhausted() bool { return s.bounded && s.emitted >= s.limit }

// next fills buf with the next records and returns how many; 0 when no
// record is due yet (paced) or the source is exhausted.
func (s *genSource) next(buf []Record) int {
	if s.start.IsZero() {
		s.start = time.Now()
	}
	want := uint64(len(buf))
	if s.bounded {
		want = min(want, s.limit-min(s.emitted, s.limit))
	}
	if s.rate > 0 {
		due := s.base + uint64(time.Since(s.start).Seconds()*s.rate)
		want = min(want, due-min(due, s.emitted))
	}
	s.gen.fill(buf[:want], s.sub+s.emitted*s.par, s.par)
	s.emitted += want
	s.produced.Add(want)
	return int(want)
}

// nextDue returns when the next record is due (paced sources only).
func (s *genSource) nextDue() time.Time {
	return s.start.Add(time.Duration(float64(s.emitted-s.base+1) / s.rate * float64(time.Second)))
}

// engineSource runs a genSource as a ringflow source (operator.Source and
// operator.Pacer). Its position is the number of records it generated.
type engineSource struct {
	genSource
	spec     sourceSpec
	produced *counters
	first    int      // produced slot of subtask 0
	control  *Control // Config.Control, or nil
}

func (s *engineSource) Open(subtask, parallelism int, pos []byte) error {
	var emitted uint64
	if pos != nil {
		if len(pos) != 8 {
			return fmt.Errorf("source position of %d bytes, want 8", len(pos))
		}
		emitted = binary.LittleEndian.Uint64(pos)
	}
	s.init(s.spec, subtask, parallelism, emitted, s.produced.slot(s.first+subtask))
	return nil
}

func (s *engineSource) Read(buf []Record) (int, error) {
	s.control.stopSource(s)
	if s.exhausted() {
		return 0, io.EOF
	}
	return s.next(buf), nil
}

func (s *engineSource) Position() []byte { return binary.LittleEndian.AppendUint64(nil, s.emitted) }

func (s *engineSource) Close() error { return nil }

// NextReady implements operator.Pacer.
func (s *engineSource) NextReady() time.Time {
	if s.rate <= 0 || s.exhausted() || s.start.IsZero() {
		return time.Time{}
	}
	return s.nextDue()
}
