package main

import (
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ringflow/ringflow"
	"github.com/ringflow/ringflow/bench/pipelines"
)

// serveMetrics listens on addr at once (so that a bad address fails before
// the run) and serves /metrics there: the Prometheus metrics of the job c
// builds, from when it is built, and the Go runtime's. Close stops it.
func serveMetrics(addr string, c *pipelines.Config) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGoCollector())
	onJob := c.OnJob
	var last prometheus.Collector
	c.OnJob = func(j *ringflow.Job) {
		// NB: a later job (another run in this process) replaces the
		// earlier one: their metrics have the same names.
		if last != nil {
			reg.Unregister(last)
		}
		last = ringflow.NewCollector(j)
		reg.MustRegister(last)
		if onJob != nil {
			onJob(j)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	return srv, nil
}
