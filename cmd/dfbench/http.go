package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ringflow/ringflow"
)

// httpFlags are --http and --http-linger, which run, compare and nexmark
// share.
type httpFlags struct {
	addr   string
	linger time.Duration
}

func (h *httpFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&h.addr, "http", "",
		"serve the status pages of the ringflow job that runs at `ADDR` (/, /checkpoints) and its Prometheus metrics at /metrics")
	fs.DurationVar(&h.linger, "http-linger", 0, "with --http, go on serving this long after the last job ends")
}

// statusServer serves the status pages and metrics of the job it was last
// given (ringflow.StatusHandler): a later job replaces an earlier one, as
// compare's modes and nexmark's queries follow each other. Before the
// first job it serves the Go runtime's metrics at /metrics, and says so
// on the other pages.
type statusServer struct {
	srv     *http.Server
	linger  time.Duration
	current atomic.Pointer[http.Handler]
}

// serve listens at once (so that a bad address fails before any run) and
// serves; nil without --http.
func (h httpFlags) serve() (*statusServer, error) {
	if h.addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", h.addr)
	if err != nil {
		return nil, fmt.Errorf("--http: %w", err)
	}
	s := &statusServer{linger: h.linger}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "dfbench: no ringflow job has started yet", http.StatusServiceUnavailable)
	})
	var before http.Handler = mux
	s.current.Store(&before)
	s.srv = &http.Server{Handler: s}
	go s.srv.Serve(ln)
	return s, nil
}

// ServeHTTP serves the current job's pages.
func (s *statusServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.current.Load()).ServeHTTP(w, r)
}

// job serves j's status pages from now on; j must be built. A nil server
// does nothing.
func (s *statusServer) job(j *ringflow.Job) {
	if s == nil {
		return
	}
	h := ringflow.StatusHandler(j)
	s.current.Store(&h)
}

// close stops the server after --http-linger.
func (s *statusServer) close() {
	if s == nil {
		return
	}
	time.Sleep(s.linger)
	s.srv.Close()
}
