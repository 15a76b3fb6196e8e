package ringflow

import (
	"os"

	"golang.org/x/sys/unix"
)

// writeBehindBytes is how many bytes a part file takes between two
// requests to the kernel to start writing it back (writeBehind); the bytes
// a checkpoint's sync must still write are at most this much plus the
// sink's buffer. The request is one system call, made on the sink's
// thread. It returns in microseconds while the device's queue has room;
// when the queue is full it waits for a slot, so a smaller step would make
// more such waits in the data path. At 1M records/s with a sink, the
// latency p99 and the count of blocked steps were the same with and
// without the requests (docs/perf.md).
const writeBehindBytes = 1 << 20

// writeBehind is a file the sink writes its part to. Every
// writeBehindBytes it asks the kernel to start writing the new bytes back
// to the disk, without waiting for them (sync_file_range with
// SYNC_FILE_RANGE_WRITE). Left to itself the kernel writes dirty
// pages back only after tens of seconds, so the sync that makes a part
// durable when a checkpoint's barrier arrives would write the whole
// interval's output while the checkpoint waits; with the write-back begun
// as the part grows, that sync writes little more than the last
// writeBehindBytes. Only a request: a file system that refuses it leaves
// all the writing to the sync, which is what makes the part durable
// either way.
type writeBehind struct {
	f       *os.File
	off     int64 // bytes written to f
	started int64 // bytes whose write-back was requested
	refused bool  // the file system refused a request: ask no more
	// start requests the write-back of n bytes of f at off; startWriteBack
	// but in tests.
	start func(f *os.File, off, n int64) error
}

func newWriteBehind(f *os.File) *writeBehind {
	return &writeBehind{f: f, start: startWriteBack}
}

func (w *writeBehind) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.off += int64(n)
	if w.off-w.started >= writeBehindBytes && !w.refused {
		if w.start(w.f, w.started, w.off-w.started) != nil {
			w.refused = true
		}
		w.started = w.off
	}
	return n, err
}

// startWriteBack asks the kernel to start writing back n bytes of f at
// off, and returns without waiting for the disk.
func startWriteBack(f *os.File, off, n int64) error {
	c, err := f.SyscallConn()
	if err != nil {
		return err
	}
	cerr := c.Control(func(fd uintptr) {
		err = unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
	})
	if cerr != nil {
		return cerr
	}
	return err
}
