package postgres

import (
	"strings"
	"testing"
)

// TestNames checks the names the sink leaves in the server: a gid
// parses back to its subtask only under its own scope, fits
// PostgreSQL's 199 bytes, and holds nothing an SQL literal would need
// escaped.
func TestNames(t *testing.T) {
	long := strings.Repeat("operator-with-a-long-name/", 20)
	for _, c := range []struct{ job, op, prefix string }{
		{"0123456789abcdef01234567", "out", ""},
		{"0123456789abcdef01234567", "out'; DROP TABLE x; --", ""},
		{"0123456789abcdef01234567", long, ""},
		{"", "", "orders-sink"},
		{"", "", "a/b"},
	} {
		scope := scopeOf(c.job, c.op, c.prefix)
		gid := gidOf(scope, 12, "00ff00ff", 1<<63)
		if len(gid) > 199 {
			t.Errorf("gid %q is %d bytes, over PostgreSQL's 199", gid, len(gid))
		}
		if strings.ContainsAny(gid, `'"\ `) {
			t.Errorf("gid %q holds a quote, backslash or space", gid)
		}
		if sub, ok := subtaskOf(scope, gid); !ok || sub != 12 {
			t.Errorf("subtaskOf(%q, %q) = %d, %v; want 12", scope, gid, sub, ok)
		}
		other := scopeOf(c.job, c.op+"x", c.prefix+"x")
		if _, ok := subtaskOf(other, gid); ok {
			t.Errorf("gid %q parses under scope %q too", gid, other)
		}
		if app := appPrefixOf(scope) + "12"; len(app) > 63 {
			t.Errorf("application_name %q is over 63 bytes", app)
		}
	}
	// NB: an operator whose name starts like another's must not share
	// its gids: "out" and "out/2" escape differently.
	if _, ok := subtaskOf(scopeOf("j", "out", ""), gidOf(scopeOf("j", "out/2", ""), 0, "n", 0)); ok {
		t.Error(`a gid of operator "out/2" parses as one of operator "out"`)
	}
}
