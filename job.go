package ringflow

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringflow/ringflow/keygroups"
	"github.com/ringflow/ringflow/operator"
	"github.com/ringflow/ringflow/sched"
)

// Config configures a job. The zero value is usable: every field has a
// default.
type Config struct {
	// Workers is the number of worker threads; default: the CPUs this
	// process may use.
	Workers int
	// Parallelism is the default number of subtasks per operator; default 1.
	Parallelism int
	// MaxParallelism is the number of key groups of keyed operators: the
	// most subtasks a keyed operator may ever have. Default 128.
	MaxParallelism int
	// RingCapacity is the capacity in bytes of each ring between tasks (a
	// power of two); default 1 MiB.
	RingCapacity int
	// FrameBytes is the target payload of a DATA frame; default 32 KiB.
	FrameBytes int
	// BatchSize is the most records a source reads at once; default 1024.
	BatchSize int
	// MaxBatchDelay bounds how long a record may wait in a partly filled
	// frame while its task keeps finding input; default 1ms. (A frame is
	// sent at once when the task runs out of input.)
	MaxBatchDelay time.Duration
	// NoPin leaves worker threads unpinned.
	NoPin bool
	// NoSteal keeps each task on its own worker's thread even while the
	// kernel has given that thread's core to another thread; by default
	// another worker, between its own polls, runs the tasks of a worker
	// whose thread is away (see package sched).
	NoSteal bool
	// NoRest keeps every worker thread on its own tasks whatever the load;
	// by default, when the load has fit on fewer workers for a while, the
	// others rest and worker 0 steps their tasks, leaving their cores to
	// the rest of the process and the system (see package sched).
	NoRest bool
	// HugePages backs large keyed state (a subtask's tables past 8 MiB)
	// with transparent huge pages where the kernel offers them
	// (madvise MADV_HUGEPAGE, Linux). At millions of keys updates then
	// rarely miss the TLB: keyed-count at 1M keys ran about 7% faster on the
	// machine of docs/perf.md. Off by default: with it the slowest 1% of
	// records were slower there (docs/perf.md, "Copy-on-write state"), and
	// each state table holds up to 8 MiB it has not used yet.
	HugePages bool
	// Checkpoint configures checkpoints; they are off unless
	// Checkpoint.Interval is positive.
	Checkpoint CheckpointConfig
	// Restart says what to do when a task fails; by default the job fails.
	Restart RestartStrategy
}

func (c Config) withDefaults() Config {
	if c.Parallelism == 0 {
		c.Parallelism = 1
	}
	if c.MaxParallelism == 0 {
		c.MaxParallelism = keygroups.DefaultMaxParallelism
	}
	if c.RingCapacity == 0 {
		c.RingCapacity = 1 << 20
	}
	if c.FrameBytes == 0 {
		c.FrameBytes = 32 << 10
	}
	if c.BatchSize == 0 {
		c.BatchSize = 1024
	}
	if c.MaxBatchDelay == 0 {
		c.MaxBatchDelay = time.Millisecond
	}
	c.Checkpoint = c.Checkpoint.withDefaults()
	return c
}

func (c Config) validate() error {
	if c.Workers < 0 {
		return fmt.Errorf("ringflow: %d workers: must be at least 1 (or 0 for the default)", c.Workers)
	}
	if c.Parallelism < 1 {
		return fmt.Errorf("ringflow: default parallelism %d: must be at least 1", c.Parallelism)
	}
	if err := keygroups.ValidateMaxParallelism(c.MaxParallelism); err != nil {
		return fmt.Errorf("ringflow: %w", err)
	}
	if c.BatchSize < 1 || c.FrameBytes < 64 {
		return fmt.Errorf("ringflow: batch size %d and frame bytes %d: need at least 1 and 64", c.BatchSize, c.FrameBytes)
	}
	if c.Restart.Attempts < 0 || c.Restart.Delay < 0 {
		return fmt.Errorf("ringflow: restart strategy %+v: attempts and delay must not be negative", c.Restart)
	}
	return c.Checkpoint.validate()
}

// Job is a dataflow graph under construction, then running. Build it with
// Source, the operator functions and Sink, then call Run once.
type Job struct {
	cfg   Config
	nodes []*node
	names map[string]bool
	errs  []error // construction errors, reported by Run
	ran   bool

	metrics  map[string]*operator.Metrics
	byName   map[string]*node
	restarts atomic.Int64
	restored atomic.Uint64 // checkpoint the latest attempt started from
	paused   atomic.Bool   // PauseCheckpoints

	statsMu     sync.Mutex
	checkpoints []CheckpointStats
	workers     []WorkerStats // summed over finished attempts
	pool        *sched.Pool   // the running attempt's, or nil
}

// WorkerStats is what one worker thread's scheduler did, summed over the
// job's runs and restarts.
type WorkerStats struct {
	// Parks is how often the worker slept on its doorbell (its tasks had
	// nothing to do).
	Parks int64
	// Stolen is how often another worker polled this worker's tasks
	// while its thread was away from them: off its core, late from a sleep, or
	// in background work such as a checkpoint's write-out (see package
	// sched; Config.NoSteal turns this off).
	Stolen int64
	// Rests is how often the worker rested while worker 0 stepped its
	// tasks (the load fit on fewer workers; Config.NoRest turns this off),
	// and Rested how long it rested in all.
	Rests  int64
	Rested time.Duration
	// Preempted is how often the worker's thread was switched out while it
	// could still run: its core taken by another process, a kernel thread
	// or the Go runtime (which preempts a goroutine that has run 10ms, and
	// a worker's runs for the whole job), or handed to another runnable
	// thread by the worker's own yield when idle. Each costs the tasks on
	// that thread from microseconds to milliseconds; on a machine whose
	// cores the workers keep busy, this is where latency spikes come from.
	Preempted int64
}

// WorkerStats returns each worker's statistics so far, the running
// attempt's included.
func (j *Job) WorkerStats() []WorkerStats {
	j.statsMu.Lock()
	defer j.statsMu.Unlock()
	out := append([]WorkerStats(nil), j.workers...)
	if j.pool != nil {
		out = addWorkerStats(out, j.pool)
	}
	return out
}

// addWorkerStats adds the counters of p's workers to stats, by index.
func addWorkerStats(stats []WorkerStats, p *sched.Pool) []WorkerStats {
	for i, w := range p.Workers() {
		if i == len(stats) {
			stats = append(stats, WorkerStats{})
		}
		stats[i].Parks += w.Parks()
		stats[i].Stolen += w.Stolen()
		stats[i].Rests += w.Rests()
		stats[i].Rested += w.Rested()
		stats[i].Preempted += w.Preempted()
	}
	return stats
}

// PauseCheckpoints holds periodic checkpoints back (paused true) or lets
// them go on again (false); it may be called at any time, from any
// goroutine, before or during Run. A checkpoint already triggered goes on,
// and a bounded job still takes its final checkpoint at the end of its
// input. While paused the job takes no checkpoint (and does not wake
// resting workers for one), so stretches with and without checkpoints can
// be compared in one run (dfbench run --checkpoint-windows); what earlier
// checkpoints left, such as the state's copied pages, stays.
func (j *Job) PauseCheckpoints(paused bool) { j.paused.Store(paused) }

// Restarts returns how often the job restarted after a failure.
func (j *Job) Restarts() int { return int(j.restarts.Load()) }

// RestoredFrom returns the checkpoint the latest run or restart restored,
// or 0 if it started afresh.
func (j *Job) RestoredFrom() uint64 { return j.restored.Load() }

// parallelismOf returns the parallelism of the operator a store operator
// id ("op" or "op/state") belongs to.
func (j *Job) parallelismOf(id string) int {
	if i := strings.IndexByte(id, '/'); i >= 0 {
		id = id[:i]
	}
	if n := j.byName[id]; n != nil {
		return n.parallelism
	}
	return 0
}

// NewJob returns an empty job.
func NewJob(cfg Config) *Job {
	return &Job{cfg: cfg.withDefaults(), names: map[string]bool{}, metrics: map[string]*operator.Metrics{},
		byName: map[string]*node{}}
}

// node is one operator of the graph.
type node struct {
	id          int
	name        string
	parallelism int
	inputs      []*edge // in port order; a union makes several edges on one port
	outputs     []*edge
	ports       int  // number of typed input ports: 0 (source), 1, or 2 (join)
	keyed       bool // holds keyed state: needs key groups
	timed       bool // output carries event time
	out         *typeInfo
	// build creates one subtask's instance, feeding down (an
	// operator.Input of the output type; nil for sinks). It returns the
	// instance's typed inputs, one per port (operator.Input of each port's
	// type), and its control side; for a source, the control side is an
	// operator.SourceDriver.
	build func(ctx *operator.Context, down any) (inputs []any, op operator.Operator)
}

// edge connects two nodes.
type edge struct {
	from, to *node
	port     int
	part     operator.Partitioning
	keyHash  any // operator.KeyHasher[T] for Hash edges
}

// Option sets a property of an operator.
type Option func(*nodeOptions)

type nodeOptions struct {
	parallelism int
	codec       any // operator.Codec of the output type
	lateness    time.Duration
	late        any // func(T) for late window records
}

// Parallelism sets the number of subtasks of an operator.
func Parallelism(p int) Option { return func(o *nodeOptions) { o.parallelism = p } }

// WithCodec sets the codec for an operator's output records, for types the
// built-in codecs cannot encode or to encode them more compactly.
func WithCodec[T any](c operator.Codec[T]) Option { return func(o *nodeOptions) { o.codec = c } }

// AllowedLateness keeps a window operator's windows this long after they
// fired; late records within it update and re-fire them.
func AllowedLateness(d time.Duration) Option { return func(o *nodeOptions) { o.lateness = d } }

// LateRecords sends a window operator's records that arrive past their
// windows' allowed lateness to f (they are counted either way).
func LateRecords[T any](f func(T)) Option { return func(o *nodeOptions) { o.late = f } }

// addNode adds a node fed by the given streams' sources on port 0 (and port
// 1 for the second list).
func (j *Job) addNode(name string, opts []Option, ports ...[]streamSrc) (*node, nodeOptions) {
	var o nodeOptions
	for _, f := range opts {
		f(&o)
	}
	n := &node{id: len(j.nodes), name: name, parallelism: o.parallelism, ports: len(ports)}
	if n.parallelism == 0 {
		n.parallelism = j.cfg.Parallelism
	}
	switch {
	case name == "":
		j.errs = append(j.errs, fmt.Errorf("operator #%d has no name", n.id))
	case j.names[name]:
		j.errs = append(j.errs, fmt.Errorf("operator name %q is used twice", name))
	case strings.ContainsAny(name, "/\x00"):
		j.errs = append(j.errs, fmt.Errorf("operator name %q: may not contain '/' or NUL", name))
	}
	j.names[name] = true
	j.byName[name] = n
	for port, srcs := range ports {
		for _, s := range srcs {
			e := &edge{from: s.node, to: n, port: port, part: s.part, keyHash: s.keyHash}
			s.node.outputs = append(s.node.outputs, e)
			n.inputs = append(n.inputs, e)
		}
	}
	j.nodes = append(j.nodes, n)
	j.metrics[name] = new(operator.Metrics)
	return n, o
}

func (j *Job) errorf(format string, args ...any) {
	j.errs = append(j.errs, fmt.Errorf(format, args...))
}

// Metrics returns the counters of the named operator, summed over its
// subtasks, or nil if there is no such operator.
func (j *Job) Metrics(name string) *operator.Metrics { return j.metrics[name] }

// ErrGraph is wrapped by every error Run reports about the job graph.
var ErrGraph = errors.New("ringflow: invalid job graph")
