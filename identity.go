package ringflow

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ringflow/ringflow/snapshot"
)

// Runs and who owns an output
//
// A state directory belongs to one job: the first run on it makes a
// random job id and keeps it in the directory's JOB file, with the number
// of the current run. A run that finishes — reads all its input and takes
// its final checkpoint — marks that checkpoint final. Started again on
// that directory, the job would have nothing to do: Run reports
// ErrFinished, unless Config.RerunFinished, which starts run n+1 from
// scratch (its checkpoints, and its restarts, never restore run n's).
//
// A file sink's directory records the job and run that write it (its
// .ringflow-owner file), so that the output of two jobs, or of two runs of
// one job from scratch, is never mixed: a sink refuses a directory owned
// by another job or run (ErrSinkOwned), unless told to start it afresh
// (FileSinkOptions.Fresh). A job without checkpoints has no state
// directory: each of its runs is a job of its own.

// identity is a job's identity on its state directory: the directory's
// job id and the number of the current run.
type identity struct {
	job      string
	run      uint64
	stateDir string // "" without checkpoints
	// from names the savepoint or checkpoints the job on this state
	// directory started from (Config.RestoreFrom; see restoreSource), ""
	// if it started from scratch.
	from string
}

func (id identity) String() string {
	if id.stateDir == "" {
		return fmt.Sprintf("job %s (no state directory)", id.job)
	}
	return fmt.Sprintf("job %s run %d (state directory %s)", id.job, id.run, id.stateDir)
}

// identityFile is the name of the file in a state directory that holds
// its identity.
const identityFile = "JOB"

func newJobID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// loadIdentity returns the identity kept in stateDir, making and saving a
// new one if there is none.
func loadIdentity(stateDir string) (identity, error) {
	b, err := os.ReadFile(filepath.Join(stateDir, identityFile))
	if errors.Is(err, fs.ErrNotExist) {
		id := identity{job: newJobID(), stateDir: stateDir}
		return id, id.save()
	}
	if err != nil {
		return identity{}, fmt.Errorf("ringflow: read the job's identity: %w", err)
	}
	id, ok := parseIdentity(string(b))
	if !ok {
		return identity{}, fmt.Errorf("ringflow: %s: not a job identity file: %q", filepath.Join(stateDir, identityFile), b)
	}
	id.stateDir = stateDir
	return id, nil
}

func (id identity) encode() string {
	s := fmt.Sprintf("job %s\nrun %d\n", id.job, id.run)
	if id.from != "" {
		s += "from " + id.from + "\n"
	}
	return s
}

// parseIdentity reads "job <id>\nrun <n>\n", and "from <origin>" and
// "state <dir>" lines if there are.
func parseIdentity(s string) (identity, bool) {
	var id identity
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		switch k {
		case "job":
			id.job = v
		case "run":
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return identity{}, false
			}
			id.run = n
		case "state":
			id.stateDir = v
		case "from":
			id.from = v
		}
	}
	return id, id.job != ""
}

// save writes the identity into its state directory, atomically.
func (id identity) save() error {
	if err := writeFileAtomic(id.stateDir, identityFile, id.encode()); err != nil {
		return fmt.Errorf("ringflow: save the job's identity: %w", err)
	}
	return nil
}

// writeFileAtomic replaces dir/name with data: a temporary file, synced,
// renamed over it, and the directory synced.
func writeFileAtomic(dir, name, data string) error {
	tmp, err := os.CreateTemp(dir, "."+name+".tmp*")
	if err != nil {
		return err
	}
	_, err = tmp.WriteString(data)
	if err == nil {
		err = tmp.Sync()
	}
	if err := errors.Join(err, tmp.Close()); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return syncDir(dir)
}

// ErrFinished is wrapped by the error of a job started on a state
// directory whose latest checkpoint is the final one of a finished run.
var ErrFinished = errors.New("ringflow: the job has finished on this state directory")

// ErrSinkOwned is wrapped by the error of a file sink whose directory
// holds the output of another job, or of another run of this one.
var ErrSinkOwned = errors.New("ringflow: the file sink's directory belongs to another job")

// ofThisRun returns cp if the current run should restore it: nil if it
// belongs to an earlier run. If cp is the final checkpoint of the current
// run, the job has finished: an error wrapping ErrFinished, or, with
// Config.RerunFinished, a new run from scratch.
func (j *Job) ofThisRun(cp *snapshot.Checkpoint) (*snapshot.Checkpoint, error) {
	if cp == nil {
		return nil, nil
	}
	meta := cp.Meta()
	switch {
	case meta.Run < j.identity.run:
		return nil, nil
	case meta.Run > j.identity.run:
		return nil, fmt.Errorf("ringflow: checkpoint %d belongs to run %d, but %s says the current run is %d",
			cp.ID(), meta.Run, filepath.Join(j.identity.stateDir, identityFile), j.identity.run)
	case !meta.Final:
		return cp, nil
	case !j.cfg.RerunFinished:
		return nil, fmt.Errorf("%w: %s holds checkpoint %d, the final checkpoint of run %d, taken after the job read all its input (set Config.RerunFinished to run it again from scratch)",
			ErrFinished, j.identity.stateDir, cp.ID(), meta.Run)
	}
	next := j.identity
	next.run++
	if err := next.save(); err != nil {
		return nil, err
	}
	j.cfg.Logger.Info("ringflow: the previous run finished; a new run starts from scratch (RerunFinished)",
		"job", j.identity.String(), "checkpoint", cp.ID(), "run", next.run)
	j.identity = next
	return nil, nil
}
