package kafka

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestExchangeCreateTopics: topics are created once, again is a no-op,
// and a topic with another number of partitions fails, saying so.
func TestExchangeCreateTopics(t *testing.T) {
	c := newCluster(t, 4, []string{"old"})
	x := Exchange(ExchangeConfig{Brokers: c.ListenAddrs()})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 2 {
		if err := x.CreateTopics(ctx, []string{"a", "b"}, 6); err != nil {
			t.Fatal(err)
		}
	}
	err := x.CreateTopics(ctx, []string{"a", "old"}, 6)
	if err == nil || !strings.Contains(err.Error(), "topic old has 4 partitions, the job's plan 6") {
		t.Fatalf("got %v, want an error about topic old's 4 partitions", err)
	}
}
