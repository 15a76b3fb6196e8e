// Package soak is the measuring half of `dfbench soak`: what a long run
// of a pipeline samples, how the samples are written, and how they are
// summed up. The processes that run the job live in cmd/dfbench.
//
// # Processes
//
// The job runs in a child process, so that it can be killed and resumed,
// and so that its memory is measured from outside:
//
//	parent: dfbench soak                     child: dfbench soak --child SPEC
//	────────────────────                     ────────────────────────────────
//	start the child, stdin and stdout  ───▶  run the pipeline on the state and
//	piped, on the state and sink dirs        sink dirs; resume from the latest
//	                                         checkpoint if there is one
//	every --fail-every: "fail\n"       ───▶  Control.Fail: the next record fails
//	                                         its task; the job restores in place
//	every --kill-every: SIGKILL, then a new child on the same dirs
//	at the end: close stdin            ───▶  Control.Stop: the sources end, the
//	                                         final checkpoint commits everything
//	at each Report: read the child's   ◀───  every --interval: one Report, a JSON
//	RSS (/proc/PID/status), walk the         line: Go memory and GC, records/s,
//	dirs, write a Sample (a CSV row)         latency p99, checkpoints that ended
//	                                         since the last; the last one has End
//	check the sink dir's output against the records the sources generated
//
// A Sample is taken when a Report arrives, so a killed child's gap shows
// as missing rows, not as rows of zeros. Counters in a Sample (checkpoints,
// restarts, failures, kills) are totals over the soak, every child's added.
//
// # The CSV
//
// One row per Sample, after this header (units last in the names), each
// value rounded to its column's precision; ReadCSV reads the rows back,
// and refuses a line CSV would not have written, naming its line number
// and column:
//
//	t_s                  seconds since the soak started
//	child                the child process: 1, then one more after each kill
//	rss_bytes            resident memory of the child (VmRSS), and its parts:
//	rss_anon_bytes         anonymous (Go heap, stacks; RssAnon)
//	rss_file_bytes         file-backed (binary, mapped files; RssFile)
//	rss_shmem_bytes        shared memory (the rings; RssShmem)
//	heap_live_bytes      Go heap marked live by the last GC (/gc/heap/live; 0
//	                     before the child's first GC)
//	heap_objects_bytes   Go heap in objects, live and not yet swept
//	go_held_bytes        memory the Go runtime holds from the OS: mapped and
//	                     not released (/memory/classes/total − heap/released)
//	gc_cycles            GC cycles completed in the interval
//	gc_pauses            GC stop-the-world pauses in the interval
//	gc_pause_max_us      the longest of them (upper bound of its histogram bucket)
//	gc_assist_ms         CPU time goroutines spent assisting the GC in the interval
//	state_bytes          disk space of the state dir's files (as du counts)
//	state_files          regular files in the state dir
//	sink_bytes           disk space of the sink dir's files
//	sink_files           regular files in the sink dir
//	ck_completed         checkpoints completed so far
//	ck_failed            checkpoints failed so far (aborted ones are not failed)
//	ck_last_id           the latest completed checkpoint's id
//	ck_last_duration_ms  its duration, trigger to completion
//	ck_last_sync_max_us  its longest synchronous part of a subtask
//	ck_last_bytes        the bytes it wrote
//	records_per_s        records into the sink per second in the interval
//	latency_p99_us       p99 latency of the samples that reached the sink in the
//	                     interval (0 without samples)
//	latency_samples      how many samples that p99 is of
//	restarts             in-place restarts after a failure so far
//	failures             failures injected so far
//	kills                children killed so far
//	state_mapped_bytes   keyed state of plain data, held outside the Go heap
//	                     (mapped slabs: cow.MappedBytes); a CSV written
//	                     before this column reads with zeros
//
// # The plot
//
// PlotSVG draws the samples as a self-contained SVG of 1000×600 (no
// scripts, no fonts but the viewer's sans-serif): two panels over the
// minutes since the start, with a legend above each.
//
//	   ┌──────────┬───────────────┬─────────────────────────────┐
//	MB │ RSS      ┆               │                             │
//	   │          ┆ - - - - - - - │ - - - RSS bound - - - - - - │
//	   │ heap live┆               │                             │
//	   └──────────┴───────────────┼─────────────────────────────┘
//	   ┌──────────────────────────┼─────────────────────────────┐
//	ms │ · · · · · · · · · · · · ·│ · · · · · · · · · · · · · · │
//	   │ - - - - - - - - - - - - -│ - - - duration bound - - - -│
//	   └──────────────────────────┴─────────────────────────────┘
//	   0    warm-up end          kill                        min
//
// The memory panel has RSS, the Go heap marked live and, when there is
// any, the state mapped outside the heap, a line of each per child: a line
// from a killed child to the next would draw memory that no process had.
// Heap live is left out until a child's first GC, before which it reads 0. The checkpoint panel has a dot per sample at
// its latest checkpoint's duration (ck_last_duration_ms), from the first
// checkpoint on. A kill, where the child changes, is a thin line across
// both; the legend counts them.
//
// PlotOptions adds the marks of the soak's bounds: a dotted line at the
// warm-up's end; a dashed line, from there on, at the largest RSS during
// the warm-up times 1+RSSBoundPct/100, the level the summary's RSS growth
// compares with; a dashed line at a checkpoint duration bound.
//
// dfbench soak --plot FILE draws the soak's samples at its end; with
// --replot CSV it draws those of an earlier soak's --csv file, read with
// ReadCSV, and runs nothing.
//
// # The summary
//
// For each level (not the counters): its value at the end of the warm-up
// (the first sample at or after it), its final and its largest value, and
// its trend: the least-squares slope, per minute, of the samples after the
// warm-up. A series that levels off has a trend near 0; memory or files
// that keep growing show as a steady positive trend.
//
// RSS growth compares the largest RSS after the warm-up with the largest
// during it: a child restarted after a kill climbs back to the level it
// had, which is not growth, while a level that keeps rising passes the
// warm-up's peak. (A transient peak during the warm-up hides as much
// growth as it is high; the trend still shows it.)
//
// The checkpoints are summed up over the whole soak: completed, failed and
// aborted; p50, p99 (nearest rank) and maximum of the completed ones'
// durations and of their longest synchronous parts; and the worst
// checkpoint of each. Each duration is also split where its time went:
// barriers (trigger to the last synchronous part), writing (to every part
// written) and commit (the rest), with p50, p99 and maximum of each part
// and the checkpoints at or over the duration's p99 listed split so.
package soak
