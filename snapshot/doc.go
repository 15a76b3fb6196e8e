// Package snapshot is ringflow's durable checkpoint store, on an embedded
// Pebble instance under the state dir. (Full design in progress.)
package snapshot
