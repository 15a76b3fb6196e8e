package postgres

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// Names the sink leaves in the server: the global identifiers (gids) of
// its prepared transactions and the application_name of its sessions.
//
//	gid:  ringflow/<job>/<operator>/<subtask>/<nonce>.<seq>
//	      `---------- scope ---------'
//	app:  ringflow-sink <hash of scope> <subtask>
//
// The scope names one sink operator of one job (or, with
// Config.TxnPrefix, "ringflow/<prefix>/"); everything after it is the
// subtask that prepared the transaction, a random nonce drawn at Open
// (so no two instances ever make the same gid, and a gid once committed
// never names another transaction), and a sequence number.

const (
	gidRoot = "ringflow/"
	// maxScope keeps a gid under PostgreSQL's limit of 199 bytes: a
	// longer scope is replaced by its hash.
	maxScope = 150
	appRoot  = "ringflow-sink "
)

// scopeOf returns the gid scope of a job's operator, or of a prefix when
// job and operator are empty.
func scopeOf(job, operator, prefix string) string {
	s := gidRoot + escape(job) + "/" + escape(operator) + "/"
	if prefix != "" {
		s = gidRoot + escape(prefix) + "/"
	}
	if len(s) > maxScope {
		s = fmt.Sprintf("%sh%016x/", gidRoot, xxhash.Sum64String(s))
	}
	return s
}

// gidOf returns the gid of transaction seq of a subtask's instance.
func gidOf(scope string, subtask int, nonce string, seq uint64) string {
	return scope + strconv.Itoa(subtask) + "/" + nonce + "." + strconv.FormatUint(seq, 10)
}

// subtaskOf returns the subtask that made gid, a gid of scope.
func subtaskOf(scope, gid string) (int, bool) {
	rest, ok := strings.CutPrefix(gid, scope)
	if !ok {
		return 0, false
	}
	sub, _, ok := strings.Cut(rest, "/")
	n, err := strconv.Atoi(sub)
	return n, ok && err == nil && n >= 0
}

// appPrefixOf returns the start of the application_name of every
// session of scope's sink; appPrefixOf(scope)+subtask names a subtask's.
// NB: a hash, as application_name keeps only 63 bytes.
func appPrefixOf(scope string) string {
	return fmt.Sprintf("%s%016x ", appRoot, xxhash.Sum64String(scope))
}

// escape keeps letters, digits and "_.-" and writes any other byte as
// %XX: no quote reaches SQL, and no '/' splits a name.
func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// quoteLiteral quotes s as an SQL string literal; PREPARE TRANSACTION
// and COMMIT PREPARED take their gid only as one, not as a parameter.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
