package ringbench

import "testing"

// TestRunAllSizes runs every transport at every record size on a small count
// and checks the figures are present: the consumers inside verify every
// record, so a lost or reordered record fails Run.
func TestRunAllSizes(t *testing.T) {
	for size := range kinds {
		res, err := Run(Config{RecordBytes: size, Batch: 7, Records: 20_000, Capacity: 16 << 10})
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if len(res) != len(Transports) {
			t.Fatalf("size %d: %d results", size, len(res))
		}
		for i, r := range res {
			if r.Name != Transports[i] || r.RecordsPerSec <= 0 {
				t.Errorf("size %d: result %+v", size, r)
			}
		}
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []Config{
		{RecordBytes: 24, Batch: 1, Records: 1},
		{RecordBytes: 16, Batch: 0, Records: 1},
		{RecordBytes: 16, Batch: 1, Records: 0},
	} {
		if _, err := Run(c); err == nil {
			t.Errorf("Run(%+v) succeeded", c)
		}
	}
	if _, err := Run(Config{RecordBytes: 256, Batch: 4096, Records: 1, Capacity: 1 << 16}); err == nil {
		t.Error("a batch larger than the ring's largest frame was accepted")
	}
}
