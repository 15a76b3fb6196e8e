package ringflow

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/ringflow/ringflow/internal/invariants"
	"github.com/ringflow/ringflow/internal/operator"
	"github.com/ringflow/ringflow/keygroups"
)

// hasherFor returns the key hash for keys of type K: xxhash64 of the key's
// bytes (an integer's 8 little-endian bytes; a string's bytes; a plain
// struct's memory, when it has no padding), or of its codec encoding for
// other keys.
func hasherFor[K comparable]() (func(K) uint64, error) {
	var zero K
	switch any(zero).(type) {
	case uint64:
		return func(k K) uint64 { return keygroups.HashUint64(*(*uint64)(unsafe.Pointer(&k))) }, nil
	case int64:
		return func(k K) uint64 { return keygroups.HashUint64(*(*uint64)(unsafe.Pointer(&k))) }, nil
	case int:
		return func(k K) uint64 { return keygroups.HashUint64(uint64(*(*int)(unsafe.Pointer(&k)))) }, nil
	case uint32:
		return func(k K) uint64 { return keygroups.HashUint64(uint64(*(*uint32)(unsafe.Pointer(&k)))) }, nil
	case int32:
		return func(k K) uint64 { return keygroups.HashUint64(uint64(*(*int32)(unsafe.Pointer(&k)))) }, nil
	case string:
		return func(k K) uint64 { return keygroups.HashString(*(*string)(unsafe.Pointer(&k))) }, nil
	}
	t := reflect.TypeFor[K]()
	if operator.Plain(t) && !hasPadding(t) {
		size := t.Size()
		return func(k K) uint64 { return xxhash.Sum64(unsafe.Slice((*byte)(unsafe.Pointer(&k)), size)) }, nil
	}
	codec, err := operator.CodecFor[K]()
	if err != nil {
		return nil, fmt.Errorf("key type %s cannot be hashed: %v", t, err)
	}
	return func(k K) uint64 { return xxhash.Sum64(codec.Append(nil, &k)) }, nil
}

// hasPadding reports whether values of t have bytes that belong to no
// field, which need not be equal in equal values.
func hasPadding(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Struct:
		var sum uintptr
		for i := range t.NumField() {
			f := t.Field(i)
			if hasPadding(f.Type) {
				return true
			}
			sum += f.Type.Size()
		}
		return sum != t.Size()
	case reflect.Array:
		return hasPadding(t.Elem())
	case reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return true // +0 and -0 are equal with different bits
	}
	return false
}

// batchKeysFor returns the batch form of KeyFuncs for key, which hashes with
// hash: it fills keys (if not nil) and hashes (if not nil) for a batch of
// records. With the user's batch form of key (all, if not nil) it calls
// that once per batch; otherwise key once per record. For 8-byte integer
// keys the hash is inlined, and without keys to fill the batch form
// writes the keys into hashes, which are then hashed in place. Calling
// key and hash per record through function values would cost three
// indirect calls on the keyed path's every record.
func batchKeysFor[K comparable, T any](key func(T) K, all func([]T, []K), hash func(K) uint64) func(recs []T, keys []K, hashes []uint64) {
	keysOnly := func(recs []T, keys []K) {
		keys = keys[:len(recs)]
		if all != nil {
			all(recs, keys)
			if invariants.Enabled {
				checkBatchKeys(key, recs, keys)
			}
			return
		}
		for i := range recs {
			keys[i] = key(recs[i])
		}
	}
	var zero K
	switch any(zero).(type) {
	case uint64, int64:
		return func(recs []T, keys []K, hashes []uint64) {
			if hashes == nil {
				keysOnly(recs, keys)
				return
			}
			hashes = hashes[:len(recs)]
			if all != nil {
				ks := keys
				if ks == nil {
					// NB: K is 8 bytes, as a hash is: the keys go into
					// hashes, and are hashed in place.
					ks = unsafe.Slice((*K)(unsafe.Pointer(unsafe.SliceData(hashes))), len(hashes))
				}
				keysOnly(recs, ks)
				for i := range hashes {
					hashes[i] = keygroups.HashUint64(*(*uint64)(unsafe.Pointer(&ks[i])))
				}
				return
			}
			for i := range recs {
				k := key(recs[i])
				if keys != nil {
					keys[i] = k
				}
				hashes[i] = keygroups.HashUint64(*(*uint64)(unsafe.Pointer(&k)))
			}
		}
	}
	return func(recs []T, keys []K, hashes []uint64) {
		if hashes == nil {
			keysOnly(recs, keys)
			return
		}
		hashes = hashes[:len(recs)]
		if all != nil && keys != nil {
			keysOnly(recs, keys)
			for i := range hashes {
				hashes[i] = hash(keys[i])
			}
			return
		}
		for i := range recs {
			k := key(recs[i])
			if keys != nil {
				keys[i] = k
			}
			hashes[i] = hash(k)
		}
	}
}

// checkBatchKeys panics unless the keys a KeyByBatch batch form gave are
// the ones its per-record key function gives (invariants builds only).
func checkBatchKeys[K comparable, T any](key func(T) K, recs []T, keys []K) {
	for i := range recs {
		if k := key(recs[i]); keys[i] != k {
			panic(invariants.Failf("KeyByBatch: the batch form gave key %v for record %d of %d, the key function %v", keys[i], i, len(recs), k))
		}
	}
}
