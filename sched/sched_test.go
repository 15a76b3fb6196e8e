package sched

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ringflow/ringflow/ring"
)

// producer writes n sequence numbers into a ring, one frame per step.
type producer struct {
	w    *ring.Writer
	next uint64
	n    uint64
}

func (p *producer) Step(time.Time) (Status, error) {
	if p.next == p.n {
		if !p.w.WriteEnd() {
			return Idle, nil
		}
		p.w.Flush()
		return Done, nil
	}
	k := min(64, p.n-p.next)
	buf := p.w.Reserve(int(k) * 8)
	if buf == nil {
		p.w.Flush()
		return Idle, nil
	}
	for i := range k {
		binary.LittleEndian.PutUint64(buf[i*8:], p.next+i)
	}
	p.w.Commit(int(k)*8, int(k))
	p.w.Flush()
	p.next += k
	return Progress, nil
}
func (p *producer) PrepareToPark() bool { return p.w.PrepareToPark(64 * 8) }
func (p *producer) Unpark()             { p.w.Unpark() }
func (p *producer) Deadline() time.Time { return time.Time{} }

// consumer checks the sequence and fails on a gap.
type consumer struct {
	rd   *ring.Reader
	next uint64
}

func (c *consumer) Step(time.Time) (Status, error) {
	f, err := c.rd.Next()
	if err == ring.ErrEmpty {
		return Idle, nil
	}
	if err != nil {
		return Idle, err
	}
	defer c.rd.Release(f)
	if f.Type == ring.FrameEnd {
		return Done, nil
	}
	for i := range f.Count {
		if v := binary.LittleEndian.Uint64(f.Payload[i*8:]); v != c.next {
			return Idle, fmt.Errorf("got %d, want %d", v, c.next)
		}
		c.next++
	}
	return Progress, nil
}
func (c *consumer) PrepareToPark() bool { return c.rd.PrepareToPark() }
func (c *consumer) Unpark()             { c.rd.Unpark() }
func (c *consumer) Deadline() time.Time { return time.Time{} }

// pipeline builds k producer→consumer pairs, assigning producers and
// consumers round robin so that pairs straddle workers when there are two.
func pipeline(t *testing.T, p *Pool, k int, n uint64) []*consumer {
	var cons []*consumer
	ws := p.Workers()
	for i := range k {
		r, err := ring.New(ring.Options{Capacity: 4096})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		pw, cw := ws[i%len(ws)], ws[(i+1)%len(ws)]
		r.SetWakers(cw, pw)
		c := &consumer{rd: r.Reader()}
		pw.Add(&producer{w: r.Writer(), n: n})
		cw.Add(c)
		cons = append(cons, c)
	}
	return cons
}

func TestRunDelivers(t *testing.T) {
	for _, workers := range []int{1, 2, 3} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) {
			p, err := New(Options{Workers: workers})
			if err != nil {
				t.Fatal(err)
			}
			cons := pipeline(t, p, 4, 200_000)
			if err := p.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			for i, c := range cons {
				if c.next != 200_000 {
					t.Errorf("consumer %d got %d records", i, c.next)
				}
			}
		})
	}
}

// slowProducer makes its consumer's worker park: it produces one frame per
// deadline tick.
type slowProducer struct {
	producer
	due time.Time
}

func (s *slowProducer) Step(now time.Time) (Status, error) {
	if now.Before(s.due) {
		return Idle, nil
	}
	s.due = now.Add(200 * time.Microsecond)
	return s.producer.Step(now)
}
func (s *slowProducer) Deadline() time.Time { return s.due }

// TestParkAndWake runs a producer that honours a deadline between frames on
// one worker and its consumer on another; the consumer's worker must park
// and be woken by the ring, and every record must arrive.
func TestParkAndWake(t *testing.T) {
	// Park after the first idle poll, so that parking does not depend on
	// how fast the machine spins and yields.
	spin, yield := spinPolls, yieldPolls
	spinPolls, yieldPolls = 1, 1
	defer func() { spinPolls, yieldPolls = spin, yield }()
	p, err := New(Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := ring.New(ring.Options{Capacity: 4096})
	defer r.Close()
	ws := p.Workers()
	r.SetWakers(ws[1], ws[0])
	c := &consumer{rd: r.Reader()}
	ws[0].Add(&slowProducer{producer: producer{w: r.Writer(), n: 64 * 200}})
	ws[1].Add(c)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c.next != 64*200 {
		t.Fatalf("got %d records", c.next)
	}
	if ws[1].Parks() == 0 {
		t.Fatal("the consumer's worker never parked")
	}
}

type panicky struct{ after int }

func (p *panicky) Step(time.Time) (Status, error) {
	if p.after--; p.after < 0 {
		panic("boom")
	}
	return Progress, nil
}
func (p *panicky) PrepareToPark() bool { return false }
func (p *panicky) Unpark()             {}
func (p *panicky) Deadline() time.Time { return time.Time{} }

type forever struct{}

func (forever) Step(time.Time) (Status, error) { return Idle, nil }
func (forever) PrepareToPark() bool            { return true }
func (forever) Unpark()                        {}
func (forever) Deadline() time.Time            { return time.Time{} }

// TestPanicStopsPool checks that a panicking task fails Run with a
// PanicError carrying the stack, that a parked worker on another thread is
// woken and exits, and that no goroutine is left behind.
func TestPanicStopsPool(t *testing.T) {
	before := runtime.NumGoroutine()
	p, _ := New(Options{Workers: 2})
	p.Workers()[0].Add(&panicky{after: 1000})
	p.Workers()[1].Add(forever{})
	err := p.Run(context.Background())
	var pe *PanicError
	if !errors.As(err, &pe) || !errors.Is(err, ErrPanic) || pe.Value != "boom" ||
		!strings.Contains(string(pe.Stack), "panicky") {
		t.Fatalf("Run returned %v, want a PanicError for boom with its stack", err)
	}
	waitGoroutines(t, before)
}

func TestCancel(t *testing.T) {
	before := runtime.NumGoroutine()
	p, _ := New(Options{Workers: 2})
	p.Workers()[0].Add(forever{})
	p.Workers()[1].Add(forever{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for p.Workers()[0].Parks() == 0 {
			runtime.Gosched()
		}
		cancel()
	}()
	if err := p.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
	waitGoroutines(t, before)
}

// waitGoroutines waits (bounded) for the goroutine count to fall back to n.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	for i := 0; runtime.NumGoroutine() > n; i++ {
		if i == 1000 {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines left, want %d:\n%s", runtime.NumGoroutine(), n,
				buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

func TestNewRejectsZeroWorkers(t *testing.T) {
	if _, err := New(Options{Workers: -1}); err == nil {
		t.Fatal("New accepted -1 workers")
	}
}
