// Package scenario runs narrated golden scenarios: the data-driven tests of
// the project's deterministic cores (align's aligner, sched's policy).
//
// A scenario file is a sequence of blocks: comment lines (# ...) and blank
// lines, then a command line, a "----" line, and the expected output up to
// the next blank line:
//
//	# Step 1: channel 1 delivers barrier 7 first.
//	barrier ch=1 id=7 now=2ms
//	----
//	block ch=1
//
// A command is a name followed by key=value arguments. The test interprets
// each command and returns its output lines; Run compares them with the
// expected ones, or, when rewriting, writes the file anew with the comments
// and commands kept and the outputs regenerated.
package scenario

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Command is one command of a scenario.
type Command struct {
	Where string // file:line, for messages
	Name  string
	Args  map[string]string
	Line  string // the whole command line
}

// Interpreter runs one command and returns its output lines.
type Interpreter func(t *testing.T, c Command) []string

// RunGlob runs every file matching glob as a subtest, each with a fresh
// interpreter from newInterp. It fails if no file matches.
func RunGlob(t *testing.T, glob string, rewrite bool, newInterp func() Interpreter) {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios match %s: %v", glob, err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { Run(t, f, rewrite, newInterp()) })
	}
}

type block struct {
	preamble []string // comments and blank lines before the command
	line     int      // of the command
	command  string
	expected []string
}

// Run runs the scenario file at path through interp.
func Run(t *testing.T, path string, rewrite bool, interp Interpreter) {
	t.Helper()
	blocks, trailer := parse(t, path)
	var out strings.Builder
	for _, b := range blocks {
		where := fmt.Sprintf("%s:%d", path, b.line)
		fields := strings.Fields(b.command)
		c := Command{Where: where, Name: fields[0], Args: map[string]string{}, Line: b.command}
		for _, f := range fields[1:] {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				t.Fatalf("%s: argument %q is not key=value", where, f)
			}
			c.Args[k] = v
		}
		got := interp(t, c)
		for _, l := range b.preamble {
			out.WriteString(l + "\n")
		}
		fmt.Fprintf(&out, "%s\n----\n%s\n\n", b.command, strings.Join(got, "\n"))
		if !rewrite && strings.Join(got, "\n") != strings.Join(b.expected, "\n") {
			t.Errorf("%s: %s\ngot:\n%s\nwant:\n%s", where, b.command,
				strings.Join(got, "\n"), strings.Join(b.expected, "\n"))
		}
	}
	if rewrite {
		for _, l := range trailer {
			out.WriteString(l + "\n")
		}
		if err := os.WriteFile(path, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func parse(t *testing.T, path string) (blocks []block, trailer []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	var pre []string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			pre = append(pre, l)
			continue
		}
		b := block{preamble: pre, line: i + 1, command: l}
		pre = nil
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s:%d: command %q not followed by ----", path, i+1, l)
		}
		for i += 2; i < len(lines) && lines[i] != ""; i++ {
			b.expected = append(b.expected, lines[i])
		}
		blocks = append(blocks, b)
	}
	return blocks, pre
}

// Allow fails the test if c has an argument outside names (space-separated).
func (c Command) Allow(t *testing.T, names string) {
	t.Helper()
	for k := range c.Args {
		if !strings.Contains(" "+names+" ", " "+k+" ") {
			t.Fatalf("%s: %s takes no argument %q", c.Where, c.Name, k)
		}
	}
}

// Has reports whether c has argument key.
func (c Command) Has(key string) bool { _, ok := c.Args[key]; return ok }

// String returns argument key, or def.
func (c Command) String(key, def string) string {
	if v, ok := c.Args[key]; ok {
		return v
	}
	return def
}

// Int returns argument key as an integer, or def.
func (c Command) Int(t *testing.T, key string, def int) int {
	t.Helper()
	return arg(t, c, key, def, strconv.Atoi)
}

// Float returns argument key as a number, or def.
func (c Command) Float(t *testing.T, key string, def float64) float64 {
	t.Helper()
	return arg(t, c, key, def, func(v string) (float64, error) { return strconv.ParseFloat(v, 64) })
}

// Duration returns argument key as a Go duration, or def.
func (c Command) Duration(t *testing.T, key string, def time.Duration) time.Duration {
	t.Helper()
	return arg(t, c, key, def, time.ParseDuration)
}

// Bool returns argument key as a boolean, or def.
func (c Command) Bool(t *testing.T, key string, def bool) bool {
	t.Helper()
	return arg(t, c, key, def, strconv.ParseBool)
}

// arg parses argument key of c with parse, or returns def if c has none;
// a value that does not parse fails the test.
func arg[T any](t *testing.T, c Command, key string, def T, parse func(string) (T, error)) T {
	t.Helper()
	v, ok := c.Args[key]
	if !ok {
		return def
	}
	x, err := parse(v)
	if err != nil {
		t.Fatalf("%s: %s=%q: %v", c.Where, key, v, err)
	}
	return x
}
