package align

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	golden "github.com/ringflow/ringflow/internal/scenario"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output in testdata/*.txt")

// TestScenarios runs the narrated golden scenarios in testdata/*.txt.
//
// A file is a sequence of blocks: comment lines (# ...) and blank lines,
// then a command line, a "----" line, and the expected output up to the next
// blank line. Commands:
//
//	init channels=N [mode=exactly-once|at-least-once] [timeout=off|D] [max-concurrent=N]
//	barrier ch=C id=N [trigger=D] [kind=aligned|unaligned|savepoint] [now=D]
//	peek-barrier ch=C id=N [trigger=D] [kind=K] [now=D]
//	end ch=C [now=D]
//	tick now=D
//	abort id=N [now=D]
//	data ch=C       (the runtime wants to process a record of C: may it?)
//	state           (blocked, recording and ended channels; pending checkpoints)
//
// Durations (D) are Go durations from the clock's zero; now= sets the clock
// and it stays there for later commands. With -rewrite the expected output
// is regenerated; the comments and commands are kept.
func TestScenarios(t *testing.T) {
	golden.RunGlob(t, "testdata/*.txt", *rewrite, func() golden.Interpreter {
		var h scenario
		return func(t *testing.T, c golden.Command) []string { return h.run(t, c.Where, c.Line) }
	})
}

var allowedArgs = map[string]string{
	"init":         "channels mode timeout max-concurrent",
	"barrier":      "ch id trigger kind now",
	"peek-barrier": "ch id trigger kind now",
	"end":          "ch now",
	"tick":         "now",
	"abort":        "id now",
	"data":         "ch now",
	"state":        "",
}

// scenario is the interpreter's state: the aligner and the clock.
type scenario struct {
	a     *Aligner
	nowNs int64
}

func (h *scenario) run(t *testing.T, where, command string) []string {
	t.Helper()
	fields := strings.Fields(command)
	args := parseArgs(t, where, fields[1:])
	for k := range args {
		if !strings.Contains(" "+allowedArgs[fields[0]]+" ", " "+k+" ") {
			t.Fatalf("%s: %s takes no argument %q", where, fields[0], k)
		}
	}
	if fields[0] == "init" {
		return h.init(t, where, args)
	}
	if h.a == nil {
		t.Fatalf("%s: %s before init", where, fields[0])
	}
	if now, ok := args["now"]; ok {
		h.nowNs = int64(parseDuration(t, where, now))
	}
	in := Input{NowNs: h.nowNs}
	switch fields[0] {
	case "barrier", "peek-barrier":
		in.Type = InputBarrier
		if fields[0] == "peek-barrier" {
			in.Type = InputPeekedBarrier
		}
		in.Channel = argInt(t, where, args, "ch", -1)
		in.Barrier = Barrier{
			ID:        uint64(argInt(t, where, args, "id", 0)),
			TriggerNs: int64(parseDuration(t, where, argString(args, "trigger", "0s"))),
			Kind:      parseKind(t, where, argString(args, "kind", "aligned")),
		}
	case "end":
		in.Type = InputEnd
		in.Channel = argInt(t, where, args, "ch", -1)
	case "tick":
		in.Type = InputTick
	case "abort":
		in.Type = InputAbort
		in.Barrier.ID = uint64(argInt(t, where, args, "id", 0))
	case "data":
		return []string{h.data(argInt(t, where, args, "ch", -1))}
	case "state":
		return h.state()
	default:
		t.Fatalf("%s: unknown command %q", where, fields[0])
	}
	return h.step(in)
}

func (h *scenario) init(t *testing.T, where string, args map[string]string) []string {
	cfg := Config{
		Channels:         argInt(t, where, args, "channels", 0),
		AlignmentTimeout: AlwaysAligned,
		MaxConcurrent:    argInt(t, where, args, "max-concurrent", 0),
	}
	switch m := argString(args, "mode", "exactly-once"); m {
	case "exactly-once":
	case "at-least-once":
		cfg.Mode = AtLeastOnce
	default:
		cfg.Mode = Mode(argInt(t, where, map[string]string{"mode": m}, "mode", 0))
	}
	if d := argString(args, "timeout", "off"); d != "off" {
		cfg.AlignmentTimeout = parseDuration(t, where, d)
	}
	h.nowNs = 0
	a, err := New(cfg)
	if err != nil {
		h.a = nil
		return []string{"error: " + err.Error()}
	}
	h.a = a
	return []string{"ok"}
}

func (h *scenario) step(in Input) []string {
	acts, err := h.a.Step(in)
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	if len(acts) == 0 {
		return []string{"(no actions)"}
	}
	out := make([]string, len(acts))
	for i, act := range acts {
		out[i] = act.String()
	}
	return out
}

// data answers what the runtime does with the next record of channel c.
func (h *scenario) data(c int) string {
	switch {
	case c < 0 || c >= len(h.a.chans):
		return fmt.Sprintf("error: no channel %d", c)
	case h.a.chans[c].ended:
		return fmt.Sprintf("error: channel %d ended", c)
	case h.a.Blocked(c):
		return fmt.Sprintf("refused: channel %d is blocked", c)
	case h.a.Recording(c) != 0:
		return fmt.Sprintf("processed, and recorded as channel state of %d", h.a.Recording(c))
	}
	return "processed"
}

func (h *scenario) state() []string {
	var blocked, recording, ended []string
	for c, ch := range h.a.chans {
		if ch.blocked {
			blocked = append(blocked, strconv.Itoa(c))
		}
		if ch.recording != 0 {
			recording = append(recording, fmt.Sprintf("%d(for %d)", c, ch.recording))
		}
		if ch.ended {
			ended = append(ended, strconv.Itoa(c))
		}
	}
	out := []string{
		fmt.Sprintf("now=%v blocked=[%s] recording=[%s] ended=[%s]", time.Duration(h.a.nowNs),
			strings.Join(blocked, " "), strings.Join(recording, " "), strings.Join(ended, " ")),
	}
	for _, cp := range h.a.pending {
		phase := "aligning"
		if cp.unaligned {
			phase = "recording"
		}
		out = append(out, fmt.Sprintf("checkpoint %d %s kind=%s trigger=%v read=%v aligned=%d/%d",
			cp.ID, phase, cp.Kind, time.Duration(cp.TriggerNs), cp.read.ToArray(), cp.aligned, len(h.a.chans)))
	}
	if d, ok := h.a.Deadline(); ok {
		out = append(out, fmt.Sprintf("deadline=%v", time.Duration(d)))
	}
	return out
}

func parseArgs(t *testing.T, where string, fields []string) map[string]string {
	args := make(map[string]string)
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			t.Fatalf("%s: argument %q is not key=value", where, f)
		}
		args[k] = v
	}
	return args
}

func argString(args map[string]string, key, def string) string {
	if v, ok := args[key]; ok {
		return v
	}
	return def
}

func argInt(t *testing.T, where string, args map[string]string, key string, def int) int {
	v, ok := args[key]
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s: %s=%q: %v", where, key, v, err)
	}
	return n
}

func parseDuration(t *testing.T, where, s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	return d
}

func parseKind(t *testing.T, where, s string) Kind {
	for k := KindAligned; k <= KindSavepoint; k++ {
		if k.String() == s {
			return k
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s: unknown kind %q", where, s)
	}
	return Kind(n)
}
