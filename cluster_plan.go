package ringflow

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ringflow/ringflow/keygroups"
)

// ClusterPlan is how a job runs as the processes of a Cluster: its graph
// cut at every keyed exchange into sub-topologies, the repartition topic
// that replaces each cut edge, the key groups each partition of those
// topics carries and the partitions each process owns. Every process
// computes the same plan from the same job and Cluster.
type ClusterPlan struct {
	JobID          string
	Processes      int
	Partitions     int // of each repartition topic
	MaxParallelism int
	SubTopologies  []SubTopology
	Topics         []RepartitionTopic
}

// SubTopology is a part of the graph between cuts: the operators that run
// over rings inside each process, the repartition topics it reads and
// those it writes.
type SubTopology struct {
	Operators []string
	Reads     []string
	Writes    []string
}

// RepartitionTopic is the Kafka topic that carries one keyed exchange of
// the job between processes.
type RepartitionTopic struct {
	Name string
	// From and To are the operators of the edge the topic replaces; Side
	// names the side output of From it carries ("" for its main output).
	From, To, Side string
	// Writer and Reader name the operators the cut adds: the sink after
	// From that writes the topic and the source before To that reads it.
	Writer, Reader string
}

// KeyGroups returns the key groups partition p of every repartition topic
// carries: a contiguous range, the same for every topic.
func (p *ClusterPlan) KeyGroups(partition int) keygroups.Range {
	r, _ := keygroups.RangeOf(partition, p.Partitions, p.MaxParallelism)
	return r
}

// PartitionOf returns the partition that carries key group kg.
func (p *ClusterPlan) PartitionOf(kg int) int {
	return keygroups.SubtaskOf(kg, p.Partitions, p.MaxParallelism)
}

// Owned returns the partitions of every repartition topic that process
// reads: a contiguous range, so that a process holds the state of a
// contiguous range of key groups.
func (p *ClusterPlan) Owned(process int) keygroups.Range {
	r, _ := keygroups.RangeOf(process, p.Processes, p.Partitions)
	return r
}

// String describes the plan in lines: the sub-topologies, the topics and,
// for each process, the partitions and key groups it owns.
func (p *ClusterPlan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "job %s: %d processes, %d partitions per repartition topic, %d key groups\n",
		p.JobID, p.Processes, p.Partitions, p.MaxParallelism)
	for i, s := range p.SubTopologies {
		fmt.Fprintf(&b, "sub-topology %d: %s\n", i, strings.Join(s.Operators, ", "))
		if len(s.Reads) > 0 {
			fmt.Fprintf(&b, "  reads  %s\n", strings.Join(s.Reads, ", "))
		}
		if len(s.Writes) > 0 {
			fmt.Fprintf(&b, "  writes %s\n", strings.Join(s.Writes, ", "))
		}
	}
	for _, t := range p.Topics {
		side := ""
		if t.Side != "" {
			side = " (side output " + t.Side + ")"
		}
		fmt.Fprintf(&b, "topic %s: %s%s -> %s, written by %s, read by %s\n", t.Name, t.From, side, t.To, t.Writer, t.Reader)
	}
	for proc := range p.Processes {
		own := p.Owned(proc)
		if own.Len() == 0 {
			fmt.Fprintf(&b, "process %d: no partitions\n", proc)
			continue
		}
		fmt.Fprintf(&b, "process %d: partitions %v, key groups %v\n", proc, own, p.keyGroupsOfPartitions(own))
	}
	return b.String()
}

// ErrCluster is wrapped by every error about a job's Cluster: its
// configuration, or a graph it cannot cut.
var ErrCluster = errors.New("ringflow: cluster")

// planCluster cuts g at its hash edges. It is a pure function of the
// graph and the configuration, so that every process plans alike.
func planCluster(g Graph, c *Cluster, maxParallelism int) (*ClusterPlan, error) {
	p := &ClusterPlan{JobID: c.JobID, Processes: c.Processes, Partitions: c.partitions(maxParallelism),
		MaxParallelism: maxParallelism}
	comp := map[string]int{} // operator → sub-topology, by union of uncut edges
	parent := map[string]string{}
	var find func(string) string
	find = func(s string) string {
		if parent[s] == s {
			return s
		}
		parent[s] = find(parent[s])
		return parent[s]
	}
	for _, o := range g.Operators {
		parent[o.Name] = o.Name
	}
	for _, e := range g.Edges {
		if e.Back {
			return nil, fmt.Errorf("%w: operator %q: a loop (Iterate) cannot run distributed", ErrCluster, e.To)
		}
		if e.Partitioning != "hash" {
			parent[find(e.From)] = find(e.To)
		}
	}
	for _, o := range g.Operators {
		r := find(o.Name)
		k, ok := comp[r]
		if !ok {
			k = len(p.SubTopologies)
			comp[r] = k
			p.SubTopologies = append(p.SubTopologies, SubTopology{})
		}
		p.SubTopologies[k].Operators = append(p.SubTopologies[k].Operators, o.Name)
	}
	for _, e := range g.Edges {
		if e.Partitioning != "hash" {
			continue
		}
		t := RepartitionTopic{Name: topicName(c.JobID, len(p.Topics), e), From: e.From, To: e.To, Side: e.Side}
		t.Writer, t.Reader = t.Name+".write", t.Name+".read"
		p.Topics = append(p.Topics, t)
		from, to := &p.SubTopologies[comp[find(e.From)]], &p.SubTopologies[comp[find(e.To)]]
		from.Writes = append(from.Writes, t.Name)
		to.Reads = append(to.Reads, t.Name)
	}
	return p, nil
}

// topicName names the repartition topic of the k-th cut edge: the job id,
// the edge's number and its operators, with every character Kafka does
// not allow in a topic name replaced by '_' (the number keeps names apart
// that this makes equal).
func topicName(jobID string, k int, e GraphEdge) string {
	name := fmt.Sprintf("%s-rp%d-%s-%s", jobID, k, e.From, e.To)
	b := []byte(name)
	for i, ch := range b {
		ok := ch == '.' || ch == '_' || ch == '-' || ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z'
		if !ok {
			b[i] = '_'
		}
	}
	return string(b[:min(len(b), 249)])
}
