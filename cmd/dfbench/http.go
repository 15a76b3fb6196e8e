package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
	fs.StringVar(&h.addr, "http", "", "serve the Prometheus metrics of the ringflow job that runs at `ADDR`/metrics")
	fs.DurationVar(&h.linger, "http-linger", 0, "with --http, go on serving this long after the last job ends")
}

// metricsServer serves /metrics: the Go runtime's metrics and those of the
// job it was last given (a later job replaces an earlier one: their
// metrics have the same names).
type metricsServer struct {
	srv    *http.Server
	reg    *prometheus.Registry
	linger time.Duration
	mu     sync.Mutex
	last   prometheus.Collector
}

// serveMetrics listens at once (so that a bad address fails before any
// run) and serves; nil without --http.
func (h httpFlags) serve() (*metricsServer, error) {
	if h.addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", h.addr)
	if err != nil {
		return nil, fmt.Errorf("--http: %w", err)
	}
	s := &metricsServer{reg: prometheus.NewRegistry(), linger: h.linger}
	s.reg.MustRegister(prometheus.NewGoCollector())
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	s.srv = &http.Server{Handler: mux}
	go s.srv.Serve(ln)
	return s, nil
}

// job serves j's metrics from now on; a nil server does nothing.
func (s *metricsServer) job(j *ringflow.Job) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last != nil {
		s.reg.Unregister(s.last)
	}
	s.last = ringflow.NewCollector(j)
	s.reg.MustRegister(s.last)
}

// close stops the server after --http-linger.
func (s *metricsServer) close() {
	if s == nil {
		return
	}
	time.Sleep(s.linger)
	s.srv.Close()
}
