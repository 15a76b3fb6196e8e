// Package align is the barrier alignment state machine of one task.
package align
