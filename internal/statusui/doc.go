// Package statusui draws a job's status pages: the view models, plain
// JSON-tagged structs, and their rendering as HTML with inline SVG and CSS.
// ringflow.StatusHandler fills the views from a Job and serves them; the
// package knows nothing of the engine, so a report (dfbench compare) can
// draw the same pictures from views of its own, or from the handler's JSON,
// which decodes into these structs.
//
// Everything is drawn on the server with html/template: a page is complete
// without JavaScript and fetches nothing (styles are inline, each SVG
// carries its own, so TimelineSVG and DurationChartSVG can be dropped into
// any page). Pages that change reload themselves with a meta refresh.
// Every link is relative: the overview is the root ("./"), the history
// "checkpoints", a checkpoint "checkpoints/{id}" (its links start "../"),
// so the pages work under any prefix.
//
// # Overview
//
// The job graph, one column per topological depth (the longest path from a
// source), one row per task that does not fit beside those before it. The
// operators of a chain sit side by side in one row, framed as one task
// (they share its time). Each box is coloured by its task's time in the
// interval: idle, busy and backpressured colours mixed in proportion, and
// a bar along its bottom splits the time exactly.
//
//	┌ task gen (chained) ────────────────┐
//	│ ┌──────────┐  chained ┌──────────┐ │   hash    ┌──────────┐ rebalance ┌──────┐
//	│ │ gen      │ ┄┄┄┄┄┄┄▶ │ double   │ │ ────────▶ │ count    │ ────────▶ │ sink │
//	│ │ out 1M/s │          │ in 1M/s  │ │ queued 3% │ busy 64% │           │      │
//	│ │▇▇▇▇▇░░░░░│          │▇▇▇▇▇░░░░░│ │           │▇▇▇▇░░░░░░│           │▇▇░░░░│
//	│ └──────────┘          └──────────┘ │           └──────────┘           └──────┘
//	└────────────────────────────────────┘
//
// # Barrier timeline
//
// One row per input channel of every subtask ("from#i → to#j") and one per
// source subtask, in the job's order, on one axis of time from the
// trigger. A row holds, as rects of these classes:
//
//	           Left      Arrived  Done          Snapshot   +Sync              Acked
//	aligned    ├─transit─┤▌arrived├───blocked───┤▇▇sync▇▇┤    ░░░async░░░░░░▌ack
//	unaligned  ├─transit─┤▌arrived        ▌switch▇▇sync▇▇┤    ░░░async░░░░░░▌ack
//	                                             ├──recorded──┤ (until Done, when after the snapshot)
//	source                                       ▇▇sync▇▇┤▌forward ░░async░░▌ack
//
// Left is when the upstream subtask forwarded the barrier, Arrived when
// this subtask saw it, Done when the channel was done with the checkpoint;
// the sync part starts at the subtask's snapshot and the async part ends
// at its ack. The rows of the critical path (the channel each subtask on
// it waited on, and the source it starts at) are highlighted. A row's
// tooltip has its times. Rows have a fixed height, so a job with hundreds
// of channels makes a tall, scrolling drawing; the axis is drawn above and
// below the rows. A commit much longer than the barrier's path is noted at
// the axis's end rather than drawn to scale.
//
// # Selectors
//
// Tests that drive a browser find the parts of the pages by these ids and
// classes; they are kept stable.
//
//	page               selector                         matches
//	/                  svg#graph                        the job graph
//	                   #graph .op                       an operator's box (also .source, .operator or .sink;
//	                                                    data-operator, data-task, data-depth)
//	                   #graph .edge                     an edge (also .chained; data-from, data-to, data-partitioning)
//	                   #graph .task                     the frame of a chain of two or more operators (data-task)
//	                   #operators tr.operator           an operator (data-operator)
//	                   #subtask-rates tr.subtask-rate   an operator subtask
//	                   #edges tr.edge                   an edge
//	/checkpoints       #checkpoints tr.checkpoint       a checkpoint shown (data-id; also .completed, .failed
//	                                                    or .aborted); its first cell links to its page
//	                   svg#durations                    the duration chart: .series a series, .point a checkpoint
//	/checkpoints/{id}  #subtasks tr.subtask             a subtask (data-subtask "op#i"; .critical on the path)
//	                   svg#timeline                     the barrier timeline
//	                   #timeline g.row                  a row: also .channel (an input channel) or .source (a
//	                                                    source subtask), .critical on the critical path,
//	                                                    .unaligned for a subtask that snapshotted unaligned
//	                   #timeline g.row rect.<part>      transit, arrived, blocked, switch, recorded, sync,
//	                                                    forward, async, ack (see above); bg and path mark
//	                                                    a critical row
package statusui
