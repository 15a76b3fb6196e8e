package snapshot

import (
	"fmt"
	"slices"
)

// Assembly builds a checkpoint in memory from pieces of others: what a
// job restores when its state comes from several checkpoints, as a
// distributed job rescaled from the savepoints of all its processes does.
// The checkpoint it builds is never stored; it is checked as a stored
// manifest is (Checkpoint validates it). The zero value is ready to use;
// it keeps the byte slices it is given.
type Assembly struct {
	entries []manifestEntry
	data    [][]byte
}

func (a *Assembly) add(kind Kind, op string, x, y int, data []byte) error {
	k, err := makeEntryKey(kind, op, x, y)
	if err != nil {
		return err
	}
	a.entries = append(a.entries, manifestEntry{key: k, length: uint64(len(data)), checksum: checksum(data)})
	a.data = append(a.data, data)
	return nil
}

// KeyGroup adds the state of key group kg of operator op: its base and the
// deltas to apply to it in order.
func (a *Assembly) KeyGroup(op string, kg int, base []byte, deltas [][]byte) error {
	if err := a.add(KindKeyGroup, op, kg, 0, base); err != nil {
		return err
	}
	for i, d := range deltas {
		if err := a.add(KindKeyGroup, op, kg, i+1, d); err != nil {
			return err
		}
	}
	return nil
}

// SourcePosition adds the position of source subtask (op, subtask).
func (a *Assembly) SourcePosition(op string, subtask int, pos []byte) error {
	return a.add(KindSourcePosition, op, subtask, 0, pos)
}

// SinkTxn adds the pending transactions of sink subtask (op, subtask).
func (a *Assembly) SinkTxn(op string, subtask int, txns []byte) error {
	return a.add(KindSinkTxn, op, subtask, 0, txns)
}

// Checkpoint returns checkpoint id with meta and the entries added, or
// why they do not make one (two entries at one address, a subtask beyond
// its operator's parallelism in meta, ...). An operator's parallelism may
// exceed meta's MaxParallelism, up to MaxParallelismLimit: its subtasks
// may be those of several processes together.
func (a *Assembly) Checkpoint(id uint64, meta Meta) (*Checkpoint, error) {
	order := make([]int, len(a.entries))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(x, y int) int { return compareEntryKeys(a.entries[x].key, a.entries[y].key) })
	m := &manifest{id: id, meta: meta.clone(), entries: make([]manifestEntry, len(order)), assembled: true}
	c := &Checkpoint{id: id, meta: m.meta, entries: m.entries, data: make([][]byte, len(order))}
	for i, k := range order {
		e := a.entries[k]
		e.origin = id
		m.entries[i], c.data[i] = e, a.data[k]
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("snapshot: assemble checkpoint %d: %w", id, err)
	}
	return c, nil
}
