package cow_test

import (
	"fmt"

	"github.com/ringflow/ringflow/keygroups"
	"github.com/ringflow/ringflow/snapshot/cow"
)

// A keyed count for subtask 0 of 2: count per key, freeze at a barrier,
// keep counting while the frozen key groups are written out, then restore
// one key group into a fresh map.
func Example() {
	r, _ := keygroups.RangeOf(0, 2, 128)
	m, err := cow.New(cow.Config[uint64, int64]{
		Hash:       keygroups.HashUint64,
		KeyGroups:  r,
		KeyCodec:   cow.Uint64Codec{},
		ValueCodec: cow.Int64Codec{},
	})
	if err != nil {
		panic(err)
	}
	var key uint64
	for k := uint64(0); ; k++ { // a key that subtask 0 owns
		if r.Contains(keygroups.OfUint64(k, 128)) {
			key = k
			break
		}
	}
	for range 3 {
		p, _ := m.Upsert(key)
		*p++
	}
	snap := m.Freeze() // the barrier: O(key groups)
	p, _ := m.Upsert(key)
	*p++ // after the barrier: not in the snapshot

	kg := keygroups.OfUint64(key, 128)
	blob, _ := snap.AppendKeyGroup(nil, kg) // in the background writer
	snap.Release()

	restored, _ := cow.New(cow.Config[uint64, int64]{
		Hash: keygroups.HashUint64, KeyCodec: cow.Uint64Codec{}, ValueCodec: cow.Int64Codec{},
	})
	if _, err := restored.LoadKeyGroup(blob); err != nil {
		panic(err)
	}
	live, _ := m.Get(key)
	old, _ := restored.Get(key)
	fmt.Println("live:", live, "checkpointed:", old)
	// Output: live: 4 checkpointed: 3
}
