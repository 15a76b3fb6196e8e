package operator

// SplitSource is a Source whose input is made of splits (files,
// partitions, ranges) that its subtasks share out, so that it can be
// restored at another parallelism than a checkpoint's: its position lists
// the splits a subtask reads and where it stands in each (Flink's
// FLIP-27 sources share their splits out so). A source that does not
// implement it is restored at its checkpoint's parallelism only.
type SplitSource interface {
	// RescalePosition returns the position that subtask of parallelism
	// opens at (Source.Open), given old, the positions of every subtask
	// of the parallelism the checkpoint was taken at (old[i] of subtask
	// i; nil where a subtask had none). The subtasks at the new
	// parallelism must together read every split of old exactly once,
	// from where it stood; a subtask may be given none. It is called on
	// an instance that has not been opened.
	RescalePosition(subtask, parallelism int, old [][]byte) ([]byte, error)
}

// RescalePosition returns the position subtask of parallelism opens at
// from old, the positions of a checkpoint taken at another parallelism;
// ok is false if the source is not a SplitSource.
func (s *SourceRunner[T]) RescalePosition(subtask, parallelism int, old [][]byte) (pos []byte, ok bool, err error) {
	sp, ok := s.src.(SplitSource)
	if !ok {
		return nil, false, nil
	}
	pos, err = sp.RescalePosition(subtask, parallelism, old)
	return pos, true, err
}
