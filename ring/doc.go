// Package ring is ringflow's transport: a single-producer, single-consumer
// byte ring in mmap'd shared memory, carrying typed frames.
//
// # Memory layout
//
// A ring is one mapping: a 4 KiB header page followed by a data region whose
// size (the capacity) is a power of two. The mapping is anonymous and shared
// for rings used inside one process (New), or a file under /dev/shm that a
// second process attaches to (Create, Open).
//
//	offset  size  word               written by  ordering
//	------  ----  -----------------  ----------  ------------------------------
//	     0     8  magic "RINGFLW\x01" creator    before the ring is shared
//	     8     4  layout version      creator    before the ring is shared
//	    12     4  header size (4096)  creator    before the ring is shared
//	    16     8  capacity (bytes)    creator    before the ring is shared
//	    24     8  control reserve     creator    before the ring is shared
//	   128     8  producer position   producer   release store, once per publish
//	   256     8  consumer position   consumer   release store, once per release
//	   384     4  consumer parked     both       consumer: 1 before it sleeps;
//	                                             producer: CAS 1→0, then wakes
//	   512     4  producer parked     both       mirror image of the above
//	   640     8  consumer limit      consumer   store when it changes; producer
//	                                             loads it when full and at Flush
//	  4096   cap  data region         producer   plain stores, published by the
//	                                             producer-position store
//
// Each hot word sits on its own 128-byte line, so the producer and the
// consumer never write the same line (adjacent-line prefetch pulls lines in
// pairs, hence 128 rather than 64).
//
// Positions are monotonically increasing byte offsets; the index of a
// position in the data region is pos & (capacity-1). The ring holds
// producer - consumer bytes; it is empty when they are equal and full when
// the difference is the capacity. No Go pointer is ever stored in ring memory.
//
// # Frames
//
// Every frame starts on an 8-byte boundary with an 8-byte header:
//
//	+----------------+--------+------------------------+----------------
//	| length (4B LE) | type   | aux (3B LE)            | payload ...
//	+----------------+--------+------------------------+----------------
//
// length is the payload length in bytes; the frame occupies
// align8(8+length) bytes. type is one of DATA (a batch of records; aux is the
// record count), BARRIER (checkpoint id, trigger time, kind: aligned,
// unaligned or savepoint), WATERMARK (an event time; aux bit 0 marks the
// stream idle), END (no more frames) and PAD (fills the tail of the data
// region when the next frame would not fit before the wrap). Frames never wrap: a
// frame lies wholly inside the data region. Sentinels are frame types, never
// magic record values.
//
// # Publication
//
// The producer writes frames with plain stores, then publishes them all with
// one atomic store of the producer position (a release store; Go's atomic
// store is sequentially consistent, which is stronger). The consumer loads the
// producer position (acquire) and may then read every frame below it. It
// returns space with one atomic store of the consumer position after it is
// done with the frames it read. Each side caches the other side's position and
// reloads it only when the cache says the ring is full (producer) or empty
// (consumer), so in steady state neither touches a line the other writes.
// Both sides publish lazily: the producer when the caller flushes, the
// consumer when it has released a quarter of the ring (or of its limit, if
// that is less; see Limit) or runs out of frames.
//
// # Control reserve
//
// DATA, WATERMARK and END frames may not use the last R bytes of free space
// (R is the control reserve, set at creation). BARRIER frames may, so a
// checkpoint barrier can always be written, even into a ring that is full of
// data. R covers two barriers plus the padding a wrap may need. DATA frames
// also stay within the consumer's limit, below.
//
// # Limit
//
// Under backpressure a ring fills up, and a barrier written behind the
// data waits until the consumer has drained all of it: a megabyte of slow
// records can be seconds. The consumer may therefore bound the DATA bytes
// the ring holds (Reader.SetLimit), to what it drains in a short time. The
// limit lives in a header word only the consumer writes; 0 means none, the
// capacity less R. DATA frames leave max(R, capacity − limit) bytes free;
// WATERMARK and END frames still leave R, and BARRIER frames nothing, so
// control frames get in whatever the limit. The limit is a multiple of 8 in
// [MinLimit, capacity − R). The word sits in header space that was zero in
// rings made before it, so those read as unlimited and the layout version
// is unchanged.
//
// The producer caches the limit and reloads it with the consumer position
// when its cached view says the ring is full, and at every Flush. A lowered
// limit therefore takes effect at the producer within one old limit of
// data: the ring may fill up to the old limit until the producer's next
// Flush or full ring. A raised limit wakes a parked producer, as a publish
// does (see Waiting). The consumer publishes its position once it has
// released a quarter of the limit, so that a producer bounded by a small
// limit sees space come back before the ring is empty.
//
// A frame may need a pad in front of it, up to its own size less 8 bytes,
// so a producer under a limit should size its frames to
// FramePayloadFor(limit), about limit/2 less the frame header: the ring then
// holds one frame while the consumer reads another. MinLimit holds one frame
// of 256 bytes of payload wherever the wrap falls. Whatever the limit, an
// empty ring takes one DATA frame of up to MaxPayload bytes, so a producer
// whose frames outgrow a lowered limit still makes progress, a frame at a
// time.
//
// # Peek
//
// The consumer may scan the frames between its read position and the
// producer position without consuming them (Reader.Peek), to find a barrier
// behind queued data or to copy in-flight bytes for an unaligned checkpoint.
//
// # Waiting
//
// A side that finds the ring empty (consumer) or full (producer) spins
// briefly, then yields its thread, then parks. To park, the consumer stores 1
// into its parked word and re-reads the producer position; only if that is
// still unchanged does it sleep, in a futex wait on its parked word while the
// word holds 1. After every publish the producer reads the consumer parked
// word and, only if it is 1, clears it with a CAS and wakes the futex.
// Because both the parked-word store and the position store are sequentially
// consistent, either the consumer sees the new position or the producer sees
// the parked word; and a wake-up that falls between the consumer's re-read
// and its futex wait has already cleared the word, so the wait returns at
// once: no wake-up is lost, even one that moves no position. The producer
// parks in the mirror image, and is woken the same way by a publish and by
// a raise of the consumer's limit, which moves no position. The futex is a
// shared (not private) futex, so it works between processes. A ring used
// inside one process can instead hand wake-ups to a Waker, so that one
// worker thread can sleep on many rings at once.
//
// # Bad input
//
// Open rejects a file that is not a ring (wrong magic, unknown version, a
// capacity that is not a power of two, a size that disagrees with the header,
// a control reserve or a limit out of range) with an error naming the
// problem. The producer reads a limit word that another process changed to
// a value out of range as the nearest one in range. The reader checks every
// frame header it reads against the capacity and the producer position; a
// frame that runs past either, or has an unknown type, is reported as an
// error wrapping ErrCorrupt, never read out of bounds.
package ring
