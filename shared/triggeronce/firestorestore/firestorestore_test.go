package firestorestore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fireonce/fireonce/shared/firestoretest"
	"github.com/fireonce/fireonce/shared/triggeronce/driver"
	"github.com/fireonce/fireonce/shared/triggeronce/drivertest"
	"github.com/fireonce/fireonce/shared/triggeronce/firestorestore"
)

func TestConformance(t *testing.T) {
	env := firestoretest.New(t)
	store := firestorestore.New(env.Client, nil)
	drivertest.RunConformanceTests(t, func(t *testing.T) driver.Store { return store })
}

// coldStore uses a new Store for every call, so nothing is remembered between
// a claim and its completion: every Complete and Release takes the
// transaction path.
type coldStore struct{ client *firestore.Client }

func (c coldStore) Claim(ctx context.Context, req driver.ClaimRequest) (driver.ClaimResult, error) {
	return firestorestore.New(c.client, nil).Claim(ctx, req)
}
func (c coldStore) Complete(ctx context.Context, key driver.Key, owner string, retention time.Duration) error {
	return firestorestore.New(c.client, nil).Complete(ctx, key, owner, retention)
}
func (c coldStore) Release(ctx context.Context, key driver.Key, owner string) error {
	return firestorestore.New(c.client, nil).Release(ctx, key, owner)
}

func TestConformanceWithoutMemory(t *testing.T) {
	env := firestoretest.New(t)
	drivertest.RunConformanceTests(t, func(t *testing.T) driver.Store { return coldStore{env.Client} })
}

func request(key driver.Key, owner string, lease time.Duration) driver.ClaimRequest {
	return driver.ClaimRequest{Key: key, Owner: owner, Lease: lease, Retention: time.Hour}
}

// TestAtomicTakeover: RunTx and RunBatch take over a Run claim whose lease
// expired, with one attempt more, and fence the stale owner out.
func TestAtomicTakeover(t *testing.T) {
	env := firestoretest.New(t)
	s := firestorestore.New(env.Client, nil)
	ctx := context.Background()
	counter := env.Client.Doc("counters/c")
	runs := map[string]func(driver.ClaimRequest) (driver.ClaimResult, error){
		"RunTx": func(req driver.ClaimRequest) (driver.ClaimResult, error) {
			return s.RunTx(ctx, req, func(ctx context.Context, tx *firestore.Transaction) error {
				return tx.Set(counter, map[string]any{"n": firestore.Increment(1)}, firestore.MergeAll)
			})
		},
		"RunBatch": func(req driver.ClaimRequest) (driver.ClaimResult, error) {
			return s.RunBatch(ctx, req, func(b *firestore.WriteBatch) error {
				b.Set(counter, map[string]any{"n": firestore.Increment(1)}, firestore.MergeAll)
				return nil
			})
		},
	}
	for name, run := range runs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			key := driver.Key{EventID: "e-" + name, Function: "f"}
			if res, err := s.Claim(ctx, request(key, "stale", time.Second)); err != nil || res.Status != driver.Claimed {
				t.Fatalf("Claim = %v, %v", res.Status, err)
			}
			deadline := time.Now().Add(20 * time.Second)
			for {
				res, err := run(request(key, "atomic", time.Minute))
				if err != nil {
					t.Fatal(err)
				}
				if res.Status == driver.TakenOver {
					if res.Attempts != 2 {
						t.Errorf("Attempts = %d, want 2", res.Attempts)
					}
					break
				}
				if res.Status != driver.InProgress {
					t.Fatalf("%s under a live lease = %v, want in_progress", name, res.Status)
				}
				if time.Now().After(deadline) {
					t.Fatal("lease not taken over in time")
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err := s.Complete(ctx, key, "stale", time.Hour); !errors.Is(err, driver.ErrNotOwner) {
				t.Fatalf("stale Complete = %v, want ErrNotOwner", err)
			}
			if err := s.Release(ctx, key, "stale"); !errors.Is(err, driver.ErrNotOwner) {
				t.Fatalf("stale Release = %v, want ErrNotOwner", err)
			}
			if res, err := run(request(key, "again", time.Minute)); err != nil || res.Status != driver.Done {
				t.Fatalf("%s after takeover = %v, %v; want done", name, res.Status, err)
			}
		})
	}
}

// TestAtomicEffectPreconditions: an effect whose own precondition fails is an
// error, not a duplicate, and leaves no marker.
func TestAtomicEffectPreconditions(t *testing.T) {
	env := firestoretest.New(t)
	s := firestorestore.New(env.Client, nil)
	ctx := context.Background()
	existing := env.Client.Doc("things/existing")
	if _, err := existing.Set(ctx, map[string]any{"n": 1}); err != nil {
		t.Fatal(err)
	}
	missing := env.Client.Doc("things/missing")
	cases := map[string]func(driver.ClaimRequest) (driver.ClaimResult, error){
		"RunTxCreateExisting": func(req driver.ClaimRequest) (driver.ClaimResult, error) {
			return s.RunTx(ctx, req, func(ctx context.Context, tx *firestore.Transaction) error {
				return tx.Create(existing, map[string]any{"n": 2})
			})
		},
		"RunBatchUpdateMissing": func(req driver.ClaimRequest) (driver.ClaimResult, error) {
			return s.RunBatch(ctx, req, func(b *firestore.WriteBatch) error {
				b.Update(missing, []firestore.Update{{Path: "n", Value: 1}})
				return nil
			})
		},
	}
	for name, run := range cases {
		t.Run(name, func(t *testing.T) {
			key := driver.Key{EventID: "e-" + name, Function: "f"}
			res, err := run(request(key, "o", time.Minute))
			if err == nil {
				t.Fatalf("= %v, want the effect's precondition error", res.Status)
			}
			if _, err := s.Doc(key).Get(ctx); status.Code(err) != codes.NotFound {
				t.Fatalf("a failed effect left a marker (%v)", err)
			}
		})
	}
}
