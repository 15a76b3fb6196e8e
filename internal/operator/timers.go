package operator

// timerQueue holds timers ordered by time. A timer is identified by its
// payload p, which includes its time; adding a timer twice keeps one, and a
// deleted timer is dropped lazily when it reaches the front.
type timerQueue[P comparable] struct {
	heap timerHeap[P]
	set  map[P]struct{}
}

// add registers a timer at ts; it reports false if it was already there.
func (q *timerQueue[P]) add(ts int64, p P) bool {
	if q.set == nil {
		q.set = make(map[P]struct{})
	}
	if _, ok := q.set[p]; ok {
		return false
	}
	q.set[p] = struct{}{}
	q.heap.add(ts, p)
	return true
}

// delete removes the timer p, if it is registered.
func (q *timerQueue[P]) delete(p P) { delete(q.set, p) }

// len returns the number of registered timers.
func (q *timerQueue[P]) len() int { return len(q.set) }

// next returns the time of the earliest registered timer.
func (q *timerQueue[P]) next() (int64, bool) {
	q.skipDeleted()
	if len(q.heap.heap) == 0 {
		return 0, false
	}
	return q.heap.heap[0].ts, true
}

// pop removes and returns the earliest timer if its time is <= upTo.
func (q *timerQueue[P]) pop(upTo int64) (int64, P, bool) {
	q.skipDeleted()
	ts, p, ok := q.heap.pop(upTo)
	if ok {
		delete(q.set, p)
	}
	return ts, p, ok
}

func (q *timerQueue[P]) skipDeleted() {
	for len(q.heap.heap) > 0 {
		if _, ok := q.set[q.heap.heap[0].p]; ok {
			return
		}
		q.heap.pop(q.heap.heap[0].ts)
	}
}

// timerHeap is a binary min-heap of timers by time.
type timerHeap[P any] struct {
	heap []timerEntryAny[P]
}

type timerEntryAny[P any] struct {
	ts int64
	p  P
}

func (q *timerHeap[P]) add(ts int64, p P) {
	q.heap = append(q.heap, timerEntryAny[P]{ts, p})
	for i := len(q.heap) - 1; i > 0; {
		parent := (i - 1) / 2
		if q.heap[parent].ts <= q.heap[i].ts {
			break
		}
		q.heap[parent], q.heap[i] = q.heap[i], q.heap[parent]
		i = parent
	}
}

// pop removes and returns the earliest timer if its time is <= upTo.
func (q *timerHeap[P]) pop(upTo int64) (int64, P, bool) {
	var zero P
	if len(q.heap) == 0 || q.heap[0].ts > upTo {
		return 0, zero, false
	}
	e := q.heap[0]
	last := len(q.heap) - 1
	q.heap[0] = q.heap[last]
	q.heap[last] = timerEntryAny[P]{}
	q.heap = q.heap[:last]
	for i, n := 0, len(q.heap); ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && q.heap[r].ts < q.heap[l].ts {
			m = r
		}
		if q.heap[i].ts <= q.heap[m].ts {
			break
		}
		q.heap[i], q.heap[m] = q.heap[m], q.heap[i]
		i = m
	}
	return e.ts, e.p, true
}

// windowTimers is a queue of window timers without deduplication: a window
// operator adds a window's timer once, when it creates the window's state,
// and checks the state when the timer pops, so a timer whose window is gone
// (merged, or fired already) is dropped there. It saves the set that
// timerQueue keeps per timer.
//
// Window timers come in large groups of one time: every key's window of a
// tumbling or sliding assigner ends at the same moment. So the queue keeps
// one bucket of payloads per distinct time, in the order they were added,
// and a heap of the times alone: adding to a time that has a bucket and
// popping are O(1), and firing a group reads one slice in order, where a
// heap of every timer paid a sift through a heap of every key's timer
// (and a cache miss at most of its levels) per pop. Timers of one time pop
// in the order they were added.
type windowTimers[P any] struct {
	times   timerHeap[struct{}] // the times that have a bucket
	buckets map[int64]*timerBucket[P]
	last    *timerBucket[P] // the bucket the last add used: consecutive adds mostly share a time
	spare   []*timerBucket[P]
}

type timerBucket[P any] struct {
	ts   int64
	ps   []P
	next int // ps[:next] have popped
}

func (q *windowTimers[P]) add(ts int64, p P) {
	b := q.last
	if b == nil || b.ts != ts {
		if b = q.buckets[ts]; b == nil {
			b = q.newBucket(ts)
		}
		q.last = b
	}
	b.ps = append(b.ps, p)
}

// newBucket adds an empty bucket for time ts.
func (q *windowTimers[P]) newBucket(ts int64) *timerBucket[P] {
	var b *timerBucket[P]
	if n := len(q.spare); n > 0 {
		b, q.spare = q.spare[n-1], q.spare[:n-1]
		b.ts = ts
	} else {
		b = &timerBucket[P]{ts: ts}
	}
	if q.buckets == nil {
		q.buckets = make(map[int64]*timerBucket[P])
	}
	q.buckets[ts] = b
	q.times.add(ts, struct{}{})
	return b
}

// pop removes and returns the earliest timer if its time is <= upTo.
func (q *windowTimers[P]) pop(upTo int64) (int64, P, bool) {
	var zero P
	if len(q.times.heap) == 0 || q.times.heap[0].ts > upTo {
		return 0, zero, false
	}
	ts := q.times.heap[0].ts
	b := q.buckets[ts]
	p := b.ps[b.next]
	b.ps[b.next] = zero // NB: do not keep a popped payload reachable
	b.next++
	if b.next == len(b.ps) {
		q.dropFront(b)
	}
	return ts, p, true
}

// dropFront removes the earliest time's bucket, b, now empty.
func (q *windowTimers[P]) dropFront(b *timerBucket[P]) {
	delete(q.buckets, b.ts)
	if q.last == b {
		q.last = nil
	}
	b.ps, b.next = b.ps[:0], 0
	q.spare = append(q.spare, b)
	q.times.pop(b.ts)
}
