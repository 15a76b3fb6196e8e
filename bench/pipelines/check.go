package pipelines

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// ErrNotExactlyOnce is wrapped by the error of a check that found output
// which is not the effect of each input record exactly once.
var ErrNotExactlyOnce = errors.New("output is not exactly once")

// KeyedCountOutput checks the committed output of a keyed-count run with
// Config.SinkDir against the records its source generated. Each key k,
// with n_k records among them, must have exactly the lines "k 1", "k 2",
// ..., "k n_k" (its rolling count after each of its records), each once:
// a record lost leaves a count out, a record counted twice repeats one or
// goes past n_k.
//
// It reads the part files one at a time (AddFile), as they are committed
// or at the end, and keeps two numbers per bucket of keys: the lines of
// its keys, and the sum of their digests; at Check it regenerates the
// number of records of each key from the source's generator. A bucket
// passes when its lines number the sum of its keys' n_k and their digest
// sum equals that of the counts 1..n_k of each: a lost or repeated line
// changes the sum (of 64-bit hashes of key and count), so the check needs
// no memory per line. A bucket is a key k < maxBuckets; beyond that many
// keys, the keys ≡ k modulo it: per-key sums over 1M keys miss the cache
// at every line, and the check, which a soak runs beside the job it
// measures, took three times as long (BenchmarkKeyedCountOutputAddFile).
type KeyedCountOutput struct {
	keys       uint64
	buckets    uint64
	lines      []uint64 // per bucket
	sums       []uint64 // per bucket: sum of digest(key, count, 0)
	files      int
	total      uint64
	outOfRange []string // the first few lines with a count of 0 or a key out of range
	badRange   uint64
}

// KeyedCountCheck is what KeyedCountOutput.Check found.
type KeyedCountCheck struct {
	Records uint64 // records the source generated: the lines expected
	Lines   uint64 // committed lines read
	Files   int    // part files read
	Keys    uint64 // keys with at least one record
}

// NewKeyedCountOutput returns an empty check of the output of keyed-count
// over c's keys.
func NewKeyedCountOutput(c Config) (*KeyedCountOutput, error) {
	if c.Pipeline != "keyed-count" {
		return nil, fmt.Errorf("%w: only keyed-count's output can be checked, not %s's", ErrConfig, c.Pipeline)
	}
	c = c.withDefaults()
	b := min(c.Keys, maxBuckets)
	return &KeyedCountOutput{keys: c.Keys, buckets: b, lines: make([]uint64, b), sums: make([]uint64, b)}, nil
}

// maxBuckets is the most buckets of keys KeyedCountOutput keeps sums for:
// 16 bytes each, they fit a core's L2 cache.
const maxBuckets = 1 << 14

// PartFiles returns the committed part files of a FileSink directory, in
// no particular order.
func PartFiles(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "part-*"))
	if err != nil {
		return nil, err
	}
	return files, nil
}

// AddFile reads the lines of one committed part file.
func (o *KeyedCountOutput) AddFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 256<<10)
	for n := 1; ; n++ {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, io.EOF) && len(line) == 0 {
			break
		}
		if err != nil {
			return fmt.Errorf("%s line %d: %w", path, n, err)
		}
		key, count, ok := parseCountLine(line[:len(line)-1])
		if !ok {
			return fmt.Errorf("%s line %d: %q is not a keyed-count line (\"key count\")", path, n, line)
		}
		o.total++
		if key >= o.keys || count == 0 {
			o.badRange++
			if len(o.outOfRange) < 3 {
				o.outOfRange = append(o.outOfRange, fmt.Sprintf("%q in %s", line[:len(line)-1], filepath.Base(path)))
			}
			continue
		}
		b := key % o.buckets
		o.lines[b]++
		o.sums[b] += digest(key, count, 0)
	}
	o.files++
	return nil
}

// parseCountLine parses "key count", two unsigned decimals.
func parseCountLine(b []byte) (key, count uint64, ok bool) {
	key, b, ok = parseUint(b)
	if !ok || len(b) == 0 || b[0] != ' ' {
		return 0, 0, false
	}
	count, b, ok = parseUint(b[1:])
	return key, count, ok && len(b) == 0
}

func parseUint(b []byte) (v uint64, rest []byte, ok bool) {
	i := 0
	for ; i < len(b) && i < 19 && '0' <= b[i] && b[i] <= '9'; i++ {
		v = v*10 + uint64(b[i]-'0')
	}
	return v, b[i:], i > 0
}

// Check compares the lines read with the output of the records c's source
// generated: subtask i of its c.Parallelism generated its first ends[i]
// records (Control.Ends). The error wraps ErrNotExactlyOnce and names the
// first keys that differ.
func (o *KeyedCountOutput) Check(c Config, ends []uint64) (KeyedCountCheck, error) {
	c = c.withDefaults()
	if len(ends) != c.Parallelism {
		return KeyedCountCheck{}, fmt.Errorf("%w: %d source ends for parallelism %d", ErrConfig, len(ends), c.Parallelism)
	}
	want := generatedPerKey(c, ends)
	res := KeyedCountCheck{Lines: o.total, Files: o.files}
	wantLines, wantSums := make([]uint64, o.buckets), make([]uint64, o.buckets)
	for k, n := range want {
		res.Records += n
		if n > 0 {
			res.Keys++
		}
		b := uint64(k) % o.buckets
		wantLines[b] += n
		for v := uint64(1); v <= n; v++ {
			wantSums[b] += digest(uint64(k), v, 0)
		}
	}
	var bad []string
	nBad := 0
	for b := range o.buckets {
		if o.lines[b] == wantLines[b] && o.sums[b] == wantSums[b] {
			continue
		}
		if nBad++; len(bad) < 3 {
			bad = append(bad, o.describe(b, wantLines[b]))
		}
	}
	if nBad == 0 && o.badRange == 0 {
		return res, nil
	}
	var why []string
	if nBad > 0 {
		unit := "keys"
		if o.buckets < o.keys {
			unit = fmt.Sprintf("buckets of keys (a key's bucket is its remainder modulo %d)", o.buckets)
		}
		why = append(why, fmt.Sprintf("%d of %d %s differ (%s)", nBad, o.buckets, unit, strings.Join(bad, "; ")))
	}
	if o.badRange > 0 {
		why = append(why, fmt.Sprintf("%d lines with a count of 0 or a key not below %d (%s)", o.badRange, c.Keys,
			strings.Join(o.outOfRange, ", ")))
	}
	return res, fmt.Errorf("%w: %d lines for %d records: %s", ErrNotExactlyOnce, res.Lines, res.Records, strings.Join(why, "; "))
}

// describe says how bucket b's lines differ from the want it should have.
func (o *KeyedCountOutput) describe(b, want uint64) string {
	what := fmt.Sprintf("key %d has %d lines, want", b, o.lines[b])
	if o.buckets < o.keys {
		what = fmt.Sprintf("the keys of bucket %d have %d lines, want", b, o.lines[b])
	}
	if o.lines[b] == want {
		return fmt.Sprintf("%s %d but not the counts 1..n of each key once", what, want)
	}
	return fmt.Sprintf("%s %d: the counts 1..n of each key once", what, want)
}

// generatedPerKey counts, per key, the records c's main source generated
// when subtask i produced its first ends[i] records.
func generatedPerKey(c Config, ends []uint64) []uint64 {
	g := sourceGen(c, seedMain)
	g.sampleMask = ^uint64(0) // NB: no sample takes a clock read here
	per := make([]uint64, c.Keys)
	var buf [4096]Record
	p := uint64(c.Parallelism)
	for sub, end := range ends {
		for i := uint64(0); i < end; {
			n := min(end-i, uint64(len(buf)))
			g.fill(buf[:n], uint64(sub)+i*p, p)
			for _, r := range buf[:n] {
				per[r.Key]++
			}
			i += n
		}
	}
	return per
}

// CheckKeyedCount reads every committed part file of dir, the SinkDir of
// a keyed-count run that Control.Stop ended, and checks it as
// KeyedCountOutput does.
func CheckKeyedCount(c Config, dir string, ends []uint64) (KeyedCountCheck, error) {
	o, err := NewKeyedCountOutput(c)
	if err != nil {
		return KeyedCountCheck{}, err
	}
	files, err := PartFiles(dir)
	if err != nil {
		return KeyedCountCheck{}, err
	}
	for _, f := range files {
		if err := o.AddFile(f); err != nil {
			return KeyedCountCheck{}, err
		}
	}
	return o.Check(c, ends)
}
