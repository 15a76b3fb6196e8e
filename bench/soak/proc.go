package soak

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// RSS is a process's resident memory and its parts, in bytes, as
// /proc/PID/status gives them (VmRSS = RssAnon + RssFile + RssShmem).
type RSS struct {
	Total, Anon, File, Shmem uint64
}

// ReadRSS reads the resident memory of process pid.
func ReadRSS(pid int) (RSS, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return RSS{}, err
	}
	return parseStatus(b)
}

// parseStatus reads the RSS lines of a /proc/PID/status file, whose values
// are in kB.
func parseStatus(b []byte) (RSS, error) {
	var r RSS
	fields := map[string]*uint64{"VmRSS:": &r.Total, "RssAnon:": &r.Anon, "RssFile:": &r.File, "RssShmem:": &r.Shmem}
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) != 3 || string(f[2]) != "kB" || fields[string(f[0])] == nil {
			continue
		}
		kb, err := strconv.ParseUint(string(f[1]), 10, 64)
		if err != nil {
			return RSS{}, fmt.Errorf("status line %q: %w", sc.Bytes(), err)
		}
		*fields[string(f[0])] = kb << 10
		found++
	}
	if found != len(fields) {
		return RSS{}, fmt.Errorf("status has %d of the lines VmRSS, RssAnon, RssFile and RssShmem", found)
	}
	return r, nil
}

// DirUsage is the disk space of the regular files under a directory (their
// allocated blocks, as du counts them) and their number.
type DirUsage struct {
	Bytes uint64
	Files int
}

// Usage walks dir. Files that vanish during the walk (a checkpoint store
// deletes files as it goes) are left out; a missing dir is empty.
func Usage(dir string) (DirUsage, error) {
	var u DirUsage
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		u.Files++
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			u.Bytes += uint64(st.Blocks) * 512
		} else {
			u.Bytes += uint64(info.Size())
		}
		return nil
	})
	return u, err
}

// FreeBytes returns the space that unprivileged users may still use on
// the filesystem of dir.
func FreeBytes(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}
