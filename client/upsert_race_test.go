package client_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/client"
)

// TestConcurrentUpsertKeepsCommittedVersion: upserts of one key racing on a real worker over
// TCP. Whatever versions win or lose, the version the master lists must stay readable: a
// worker must not drop the master's committed version because a newer, never-committed
// version of the key landed on it first.
func TestConcurrentUpsertKeepsCommittedVersion(t *testing.T) {
	ip := startInproc(t, 1, 64<<20)
	c := connect(t, ip)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const key = "race"
	if err := c.Put(ctx, key, []byte("v0"), client.ReplicateConfig{Upsert: true}); err != nil {
		t.Fatal(err)
	}
	for round := range 12 {
		var wg sync.WaitGroup
		for i := range 48 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Errors are expected (a put superseded by a newer one fails); losing the
				// committed version is not.
				_ = c.Put(ctx, key, []byte(fmt.Sprintf("r%d-g%d", round, i)), client.ReplicateConfig{Upsert: true})
			}()
		}
		wg.Wait()
		if _, err := c.Get(ctx, key); err != nil {
			t.Fatalf("round %d: get after concurrent upserts: %v", round, err)
		}
	}
}
