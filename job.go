package ringflow

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringflow/ringflow/internal/operator"
	"github.com/ringflow/ringflow/keygroups"
	"github.com/ringflow/ringflow/ring"
	"github.com/ringflow/ringflow/sched"
	"github.com/ringflow/ringflow/snapshot"
)

// Config configures a job. The zero value is usable: every field has a
// default.
type Config struct {
	// Workers is the number of worker threads. Default: one per CPU of
	// CPUs, but no more than leaves the job a spare P (GOMAXPROCS - 1, at
	// least 1) unless RaiseGOMAXPROCS is set; see RaiseGOMAXPROCS.
	Workers int
	// CPUs are the CPUs the worker threads are pinned to, worker i to
	// CPUs[i % len(CPUs)]; the job's helper threads (see package sched)
	// run on them too. Default: the process's affinity mask
	// (sched_getaffinity: every CPU of the machine, unless taskset, a
	// cpuset or a container narrowed it). Each must be in that mask, once.
	// A worker busy-polls its CPU while it has work, so this is how a job
	// leaves the other CPUs to the rest of the machine.
	CPUs []int
	// RaiseGOMAXPROCS lets Run raise GOMAXPROCS, for the whole process and
	// while the job runs, to Workers + 1 when it is lower, and set it back
	// when Run returns. Without it Run leaves GOMAXPROCS alone and the
	// default Workers fit under it instead.
	//
	// Why one more than Workers: each worker holds a P (one of the Go
	// scheduler's GOMAXPROCS slots for running Go code) as long as the job
	// runs, polling its tasks on its locked thread. Everything else the
	// job needs — its checkpoints' write-out and commits, the garbage
	// collector's mark work, the runtime's timers — and the embedding
	// program's own goroutines run on the Ps left over. With none left
	// nothing deadlocks, but they run only when the runtime preempts a
	// worker (after 10ms of running), stalling that worker's tasks for as
	// long each time, and checkpoints crawl. So a job whose Workers leave
	// no spare P (Workers >= GOMAXPROCS, as set) runs as asked, and Run
	// logs a warning, unless this is set.
	RaiseGOMAXPROCS bool
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
	// Debloat is the target time of buffer debloating: each ring holds at
	// most what its consumer drains in Debloat of its busy time (its drain
	// rate, measured as it runs and smoothed, times Debloat), never less
	// than a frame needs (ring.MinLimit) nor more than RingCapacity;
	// producers shrink their frames, and sources their batches, to fit.
	// Under backpressure an aligned barrier then waits behind about
	// Debloat of work at each ring instead of a full ring, and an
	// unaligned checkpoint persists as little in-flight data. Default
	// DefaultDebloat; negative turns it off (rings fill to RingCapacity).
	// See package debloat for the rules, and docs/perf.md for what it
	// costs and gains.
	Debloat time.Duration
	// BatchSize is the most records a source reads at once; default 1024.
	// A source's watermark advances once per batch (see
	// WatermarkStrategy): 1 gives a watermark after every record.
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
	// StallBound is the time over which a task's step, or a checkpoint's
	// synchronous part on its own, is recorded as a stall, with where its
	// time went (Job.Stalls, and the part's SyncCause): a diagnostic of
	// what held processing up — preemption, page faults, a GC pause, a
	// lock, the host's steal, or the step's own work. Default
	// sched.DefaultStallBound (5ms); negative records none.
	StallBound time.Duration
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
	// AllowNonRestoredState lets a job restore a checkpoint that holds
	// state the job no longer declares (an operator or a state removed or
	// renamed): that state is dropped, and logged. By default such a
	// restore fails with a *RestoreMismatchError listing it.
	AllowNonRestoredState bool
	// RestoreFrom starts the job from a savepoint (Job.Savepoint,
	// Job.StopWithSavepoint), from a directory of savepoints (the newest
	// one in it: CheckpointConfig.SavepointDir), or from another job's
	// state directory (its latest complete checkpoint, read without
	// changing it), instead of from scratch; at any parallelism, with
	// state matched by name as on every restore (see the package doc and
	// Config.AllowNonRestoredState). The job continues the one that took
	// the savepoint: it takes that job's identity, so its file sinks go
	// on with that job's output. RestoreFrom is used only when the job's
	// own state directory holds no checkpoint; with one that started from
	// the same savepoint, the job resumes from its own latest checkpoint,
	// and with any other checkpoint Run fails (ErrRestoreFrom) rather than
	// guess which to take. See the package doc. A process of a distributed
	// job restores its own savepoint only, at its own layout; to change
	// the number of processes, see Cluster.RestoreFrom.
	RestoreFrom string
	// StopOnCancel makes a cancelled context stop the job as Job.Stop
	// does: with a final checkpoint that commits every transactional sink,
	// within Checkpoint.Timeout of the cancellation (after that, at once,
	// and Run's error says so). Run then returns ctx.Err(). The context
	// user code is given (a Sink's, a TwoPhaseSink's,
	// KeyedContext.Context) stays live while the job stops. By default a
	// cancelled job stops at once: its checkpoints in flight are aborted,
	// and what its sinks pre-committed is committed by the next run that
	// restores the latest checkpoint. Needs checkpoints.
	StopOnCancel bool
	// RerunFinished lets a job start on a state directory whose latest
	// checkpoint is the final one of a finished run: it runs again from
	// scratch, as a new run (whose file sinks need a directory of their
	// own, or FileSinkOptions.Fresh). By default Run returns an error
	// wrapping ErrFinished.
	RerunFinished bool
	// Logger receives every line the job and the packages under it log,
	// besides the error Run returns: a failure it restarted from (with a
	// panic's stack), what a restore left out or started empty,
	// checkpoints passed over, corruption the checkpoint store found, and
	// Pebble's own lines (at level Debug). Records carry the attributes
	// checkpoint, operator, subtask and err where they apply. It is
	// called from any goroutine, never on a worker's hot path. Default:
	// slog.Default().
	Logger *slog.Logger
	// Events, when set, is told of the job's lifecycle: checkpoints
	// triggered, completed, failed and aborted, restores, task failures,
	// restarts and the end of the job. See EventListener.
	Events *EventListener
	// Cluster, when set, runs the job as one of several processes joined
	// by Kafka: see Cluster and the package doc's "Distributed jobs".
	Cluster *Cluster
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
	if c.Debloat == 0 {
		c.Debloat = DefaultDebloat
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Checkpoint = c.Checkpoint.withDefaults()
	return c
}

// DefaultDebloat is Config.Debloat's default. With it, dfbench compare's
// backpressured jobs took aligned checkpoints of 9-13 ms at the median
// instead of 0.6-0.9 s, and unaligned ones persisted 200-260 times less
// in-flight data, for 1-3% of their throughput; unpaced jobs, whose
// consumers keep up, ran as fast as without (docs/perf.md, "Buffer
// debloating").
const DefaultDebloat = 10 * time.Millisecond

// ErrConfig is wrapped by every problem Run finds in a job's Config or in
// an operator's options.
var ErrConfig = errors.New("ringflow: invalid configuration")

// ConfigError is one problem with a job's configuration: a Config field,
// or an option of one operator. It wraps ErrConfig. Run reports every
// problem it finds at once (errors.Join); errors.As finds the first, and
// ConfigErrors lists them all.
type ConfigError struct {
	// Field is the Config field, as written in Go ("Checkpoint.StateDir"),
	// or the option ("Parallelism").
	Field string
	// Operator is the operator whose option is wrong; "" for Config.
	Operator string
	// Problem says what is wrong and what would be right.
	Problem string
	// Kind, when set, is the kind of graph error the problem also is
	// (ErrTypeMismatch for LateRecords of the wrong type), so that
	// errors.Is finds it by kind as it finds a GraphError's.
	Kind error
}

func (e *ConfigError) Error() string {
	if e.Operator != "" {
		return fmt.Sprintf("ringflow: operator %q: option %s: %s", e.Operator, e.Field, e.Problem)
	}
	return fmt.Sprintf("ringflow: config %s: %s", e.Field, e.Problem)
}

func (e *ConfigError) Unwrap() []error {
	if e.Kind != nil {
		return []error{ErrConfig, e.Kind}
	}
	return []error{ErrConfig}
}

// ConfigErrors returns every *ConfigError in err's tree, in order.
func ConfigErrors(err error) []*ConfigError { return errorsOf[*ConfigError](err) }

func configErrorf(field, format string, args ...any) error {
	return &ConfigError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// validate reports every problem of the configuration, each a
// *ConfigError, joined; nil if there is none.
func (c Config) validate() error {
	var errs []error
	bad := func(field, format string, args ...any) { errs = append(errs, configErrorf(field, format, args...)) }
	if c.Workers < 0 {
		bad("Workers", "%d: must be at least 1 (or 0 for the default)", c.Workers)
	}
	if len(c.CPUs) > 0 {
		if c.NoPin {
			bad("CPUs", "%v with NoPin: the CPUs are the ones to pin workers to; set one or the other", c.CPUs)
		} else if err := sched.CheckCPUs(c.CPUs); err != nil {
			bad("CPUs", "%v", err)
		}
	}
	if c.Parallelism < 1 {
		bad("Parallelism", "%d: must be at least 1 (or 0 for the default)", c.Parallelism)
	}
	if err := keygroups.ValidateMaxParallelism(c.MaxParallelism); err != nil {
		bad("MaxParallelism", "%v", err)
	}
	if r := c.RingCapacity; r < ring.MinCapacity || r > ring.MaxCapacity || r&(r-1) != 0 {
		bad("RingCapacity", "%d: must be a power of two in [%d, %d]", r, ring.MinCapacity, ring.MaxCapacity)
	}
	if c.BatchSize < 1 {
		bad("BatchSize", "%d: must be at least 1", c.BatchSize)
	}
	if c.FrameBytes < 64 {
		bad("FrameBytes", "%d: must be at least 64", c.FrameBytes)
	}
	if c.MaxBatchDelay < 0 {
		bad("MaxBatchDelay", "%v: must not be negative", c.MaxBatchDelay)
	}
	if c.Restart.Attempts < 0 || c.Restart.Delay < 0 {
		bad("Restart", "%+v: attempts and delay must not be negative", c.Restart)
	}
	if c.Restart.Attempts > 0 && !c.Checkpoint.enabled() {
		bad("Restart.Attempts", "%d restarts without checkpoints: a restart restores a checkpoint (set Checkpoint.Interval and StateDir)",
			c.Restart.Attempts)
	}
	errs = append(errs, c.validateSavepoints()...)
	return errors.Join(append(errs, c.Checkpoint.validate()...)...)
}

// Job is a dataflow graph under construction, then running. Build it with
// Source, the operator functions and Sink, then call Run once.
type Job struct {
	cfg   Config
	nodes []*node
	names map[string]bool
	errs  []error // construction errors, reported by Run
	ran   bool
	loops []loop // the job's iterations (Iterate)

	metrics   map[string][]*operator.Metrics // per subtask; under metricsMu
	metricsMu sync.Mutex
	byName    map[string]*node
	restarts  atomic.Int64
	events    *events       // Config.Events' queue, during Run
	restored  atomic.Uint64 // checkpoint the latest attempt started from
	paused    atomic.Bool   // PauseCheckpoints
	ctl       control       // Savepoint, Stop, StopWithSavepoint
	// from is what Config.RestoreFrom names, while the job may restore
	// it; set by Run before its attempts.
	from  *restoreSource
	ended []func(error) // called with Run's error as it returns (Push handles)

	// declared is the state the job's operators declare, recorded in each
	// checkpoint; set before checkpoints start.
	declared []snapshot.StateInfo
	// identity is the job's on its state directory; set before any
	// operator opens.
	identity identity

	// cut is how a distributed job's graph is cut (Config.Cluster).
	cut clusterCut
	// clusterGen is a distributed job's layout generation: 0 when it
	// first starts, one more at each rescaled start (see cluster_rescale.go).
	// Settled by each attempt before its tasks open.
	clusterGen uint64

	statsMu     sync.Mutex
	lastRestore RestoreReport
	checkpoints []CheckpointStats // the latest keptCheckpoints
	ckSummary   checkpointSummary // of every checkpoint recorded
	workers     []WorkerStats     // summed over finished attempts
	stalls      stallHistory      // of finished attempts
	pool        *sched.Pool       // the running attempt's, or nil
	channels    []channel         // the running attempt's rings, or nil
}

// channel is a ring between two operator subtasks.
type channel struct {
	from, to               string
	fromSubtask, toSubtask int
	r                      *ring.Ring
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

// Stall is a task's step, or a checkpoint's synchronous part (Part), that
// took longer than Config.StallBound, with where its time went (see
// sched.Stall).
type Stall = sched.Stall

// Stalls returns the job's latest stalls, oldest first (the last 256 over
// its attempts), and the count of all of them by cause.
func (j *Job) Stalls() ([]Stall, map[string]int64) {
	j.statsMu.Lock()
	defer j.statsMu.Unlock()
	h := j.stalls.clone()
	if j.pool != nil {
		h.add(j.pool.Stalls())
	}
	return h.latest, h.byCause
}

// stallCounts returns the count of the job's stalls by cause, over its
// attempts, without copying the latest ones (for Metrics, read at every
// scrape).
func (j *Job) stallCounts() map[string]int64 {
	j.statsMu.Lock()
	defer j.statsMu.Unlock()
	counts := maps.Clone(j.stalls.byCause)
	if counts == nil {
		counts = map[string]int64{}
	}
	if j.pool != nil {
		for k, v := range j.pool.StallCounts() {
			counts[k] += v
		}
	}
	return counts
}

// stallHistory is the stalls of a job's attempts.
type stallHistory struct {
	latest  []Stall
	byCause map[string]int64
}

// keptStalls is how many of its latest stalls a job keeps.
const keptStalls = 256

func (h *stallHistory) add(latest []Stall, byCause map[string]int64) {
	h.latest = append(h.latest, latest...)
	if n := len(h.latest); n > keptStalls {
		h.latest = append(h.latest[:0], h.latest[n-keptStalls:]...)
	}
	if h.byCause == nil {
		h.byCause = map[string]int64{}
	}
	for k, v := range byCause {
		h.byCause[k] += v
	}
}

func (h stallHistory) clone() stallHistory {
	c := stallHistory{latest: slices.Clone(h.latest), byCause: make(map[string]int64, len(h.byCause))}
	maps.Copy(c.byCause, h.byCause)
	return c
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
	return &Job{cfg: cfg.withDefaults(), names: map[string]bool{}, metrics: map[string][]*operator.Metrics{},
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
	loopHead    bool // the head of an iteration: it starts a task
	out         *typeInfo
	sides       *sideOutputs // the side outputs it may have; nil: none
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
	keyHash  any      // operator.KeyHasher[T] for Hash edges
	side     *sideOut // the side output it carries; nil: the main output
}

// Option sets a property of an operator with an output: a source or a
// transformation. The options that fit every operator (Parallelism) are
// NodeOptions, which are Options, WindowOptions and SinkOptions alike;
// those that fit only some operators have types of their own, so that
// giving one to an operator it does not fit does not compile.
type Option interface{ apply(*nodeOptions) }

// WindowOption sets a property of a window operator (Window): every Option,
// and the options that only windows have (AllowedLateness, LateRecords).
// Those are not Options, so giving one to another operator does not
// compile.
type WindowOption interface{ applyWindow(*nodeOptions) }

// SinkOption sets a property of a sink (Sink, SinkBatches, TxnSink): the
// NodeOptions. An OutputOption (WithCodec) is not one: a sink has no
// output to encode, so giving it one does not compile.
type SinkOption interface{ applySink(*nodeOptions) }

// NodeOption is an option that fits every operator: an Option, a
// WindowOption and a SinkOption.
type NodeOption func(*nodeOptions)

func (f NodeOption) apply(o *nodeOptions)       { f(o) }
func (f NodeOption) applyWindow(o *nodeOptions) { f(o) }
func (f NodeOption) applySink(o *nodeOptions)   { f(o) }

// OutputOption is an option about an operator's output (WithCodec): an
// Option and a WindowOption, but not a SinkOption.
type OutputOption func(*nodeOptions)

func (f OutputOption) apply(o *nodeOptions)       { f(o) }
func (f OutputOption) applyWindow(o *nodeOptions) { f(o) }

// windowOnly is an option that only window operators take.
type windowOnly func(*nodeOptions)

func (f windowOnly) applyWindow(o *nodeOptions) { f(o) }

type nodeOptions struct {
	parallelism    int
	parallelismSet bool
	codec          any // Codec of the output type
	lateness       time.Duration
	late           any // func(T) for late window records
}

// Parallelism sets the number of subtasks of an operator, at least 1.
func Parallelism(p int) NodeOption {
	return func(o *nodeOptions) { o.parallelism, o.parallelismSet = p, true }
}

// WithCodec sets the codec for an operator's output records, for types the
// built-in codecs cannot encode or to encode them more compactly. Sinks,
// which have no output, do not take it.
func WithCodec[T any](c Codec[T]) OutputOption { return func(o *nodeOptions) { o.codec = c } }

// AllowedLateness keeps a window operator's windows this long after they
// fired; late records within it update and re-fire them. Only Window takes
// it.
func AllowedLateness(d time.Duration) WindowOption {
	return windowOnly(func(o *nodeOptions) { o.lateness = d })
}

// LateRecords sends a window operator's records that arrive past their
// windows' allowed lateness to f (they are counted either way): it is
// LateOutput with f reading the side output, called on the window's
// task. Only Window takes it, and T must be the window's input type.
func LateRecords[T any](f func(T)) WindowOption {
	return windowOnly(func(o *nodeOptions) { o.late = f })
}

// addNode adds a node fed by the given streams' sources on port 0 (and port
// 1 for the second list).
func (j *Job) addNode(name string, opts []Option, ports ...[]streamSrc) (*node, nodeOptions) {
	var o nodeOptions
	for _, opt := range opts {
		opt.apply(&o)
	}
	return j.addNodeWith(name, o, ports...)
}

// addSink adds a sink node: one without output.
func (j *Job) addSink(name string, opts []SinkOption, srcs []streamSrc) *node {
	var o nodeOptions
	for _, opt := range opts {
		opt.applySink(&o)
	}
	n, _ := j.addNodeWith(name, o, srcs)
	return n
}

// addNodeWith is addNode with the options applied.
func (j *Job) addNodeWith(name string, o nodeOptions, ports ...[]streamSrc) (*node, nodeOptions) {
	n := &node{id: len(j.nodes), name: name, parallelism: o.parallelism, ports: len(ports)}
	if !o.parallelismSet {
		n.parallelism = j.cfg.Parallelism
	}
	switch {
	case name == "":
		j.graphErrorf(ErrOperatorName, name, "operator #%d has no name", n.id)
	case j.names[name]:
		j.graphErrorf(ErrOperatorName, name, "operator name %q is used twice", name)
	case strings.ContainsAny(name, "/\x00"):
		j.graphErrorf(ErrOperatorName, name, "operator name %q: may not contain '/' or NUL", name)
	}
	j.names[name] = true
	j.byName[name] = n
	for port, srcs := range ports {
		for _, s := range srcs {
			e := &edge{from: s.node, to: n, port: port, part: s.part, keyHash: s.keyHash, side: s.side}
			if e.part == operator.Forward && e.from.parallelism != n.parallelism {
				// A forward edge between different parallelisms cannot
				// pair subtasks: it rebalances, as in Flink.
				e.part = operator.Rebalance
			}
			s.node.outputs = append(s.node.outputs, e)
			n.inputs = append(n.inputs, e)
		}
	}
	j.nodes = append(j.nodes, n)
	j.metrics[name] = nil
	return n, o
}

// describe names a job by its first operators, for errors that involve
// two jobs.
func (j *Job) describe() string {
	if j == nil {
		return "no job"
	}
	var names []string
	for _, n := range j.nodes {
		if len(names) == 3 {
			names = append(names, "...")
			break
		}
		names = append(names, strconv.Quote(n.name))
	}
	return "the job of " + strings.Join(names, ", ")
}

// errorf records a graph error of kind ErrBadArgument.
func (j *Job) errorf(format string, args ...any) {
	j.graphErrorf(ErrBadArgument, "", format, args...)
}

// graphErrorf records a graph error of the given kind about operator op
// ("" if it concerns no single operator), reported by Run.
func (j *Job) graphErrorf(kind error, op, format string, args ...any) {
	j.errs = append(j.errs, newGraphError(kind, op, format, args...))
}

// metricsOf returns the counters of subtask i of the named operator, which
// outlive restarts, so that they count over the job's whole life.
func (j *Job) metricsOf(name string, i int) *operator.Metrics {
	j.metricsMu.Lock()
	defer j.metricsMu.Unlock()
	ms := j.metrics[name]
	for len(ms) <= i {
		ms = append(ms, new(operator.Metrics))
	}
	j.metrics[name] = ms
	return ms[i]
}

// ErrGraph is wrapped by every error Run reports about the job graph.
var ErrGraph = errors.New("ringflow: invalid job graph")

// The kinds of graph error: each *GraphError wraps one of them besides
// ErrGraph, so that errors.Is(err, ErrCycle) tells whether Run found a
// cycle, whatever else it found.
var (
	// ErrOperatorName: an operator without a name, a name used twice, or
	// one with a '/' or NUL (names key the checkpoint store).
	ErrOperatorName = errors.New("bad operator name")
	// ErrParallelism: an operator's parallelism is below 1, or a keyed
	// operator's exceeds Config.MaxParallelism.
	ErrParallelism = errors.New("bad parallelism")
	// ErrCycle: the graph has a cycle.
	ErrCycle = errors.New("cycle")
	// ErrNoSink: the job has no sink, or no operators at all.
	ErrNoSink = errors.New("no sink")
	// ErrUnusedOutput: an operator's output feeds no other operator.
	ErrUnusedOutput = errors.New("output goes nowhere")
	// ErrTypeMismatch: an option's type does not match the operator's
	// records: WithCodec for another type (a GraphError), or LateRecords
	// for another type than the window's input (a ConfigError of this
	// Kind).
	ErrTypeMismatch = errors.New("type mismatch")
	// ErrNoCodec: records that must cross a ring between tasks have a
	// type no built-in codec encodes, and no WithCodec.
	ErrNoCodec = errors.New("no codec")
	// ErrEventTime: an operator that needs event time has an input
	// without it, or its inputs mix streams with and without.
	ErrEventTime = errors.New("event time")
	// ErrForeignStream: streams of two jobs were combined.
	ErrForeignStream = errors.New("stream of another job")
	// ErrBadArgument: an argument of an operator's function cannot work
	// (a nil function, invalid windows, a key type that cannot be hashed).
	ErrBadArgument = errors.New("bad argument")
)

// GraphError is one problem of the job graph. It wraps ErrGraph and its
// Kind. Run reports every problem it finds at once (errors.Join):
// errors.Is(err, ErrCycle) tells whether one is a cycle, errors.As finds
// the first, and GraphErrors lists them all.
type GraphError struct {
	// Kind is one of the Err* kinds above (ErrCycle, ErrParallelism, ...).
	Kind error
	// Operator is the operator the problem is about; "" if there is no
	// single one (a cycle names one of its operators in Problem).
	Operator string
	// Problem says what is wrong, naming the operators involved.
	Problem string
}

func (e *GraphError) Error() string { return ErrGraph.Error() + ": " + e.Problem }

func (e *GraphError) Unwrap() []error { return []error{ErrGraph, e.Kind} }

func newGraphError(kind error, op, format string, args ...any) *GraphError {
	return &GraphError{Kind: kind, Operator: op, Problem: fmt.Sprintf(format, args...)}
}

// GraphErrors returns every *GraphError in err's tree, in order.
func GraphErrors(err error) []*GraphError { return errorsOf[*GraphError](err) }

// errorsOf returns every error of type E in err's tree, depth first.
func errorsOf[E error](err error) []E {
	var out []E
	var walk func(error)
	walk = func(err error) {
		if e, ok := err.(E); ok {
			out = append(out, e)
			return
		}
		switch e := err.(type) {
		case interface{ Unwrap() []error }:
			for _, x := range e.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}
