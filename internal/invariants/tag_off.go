//go:build !invariants

package invariants

const tagEnabled = false
