package grpccount_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/fireonce/fireonce/shared/firestoretest"
	"github.com/fireonce/fireonce/shared/grpccount"
)

// TestEmulatorClient: every RPC of the client is counted, in order, and Take
// resets the count.
func TestEmulatorClient(t *testing.T) {
	host := firestoretest.Host(t)
	project := firestoretest.NewProjectID(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var c grpccount.Counter
	client, err := grpccount.EmulatorClient(ctx, host, project, &c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		client.Close()
		_ = firestoretest.ClearProject(context.Background(), host, project)
	})
	doc := client.Doc("things/a")

	cases := []struct {
		name string
		do   func() error
		want []string
	}{
		{"Set", func() error { _, err := doc.Set(ctx, map[string]any{"n": 1}); return err }, []string{"Commit"}},
		{"Get", func() error { _, err := doc.Get(ctx); return err }, []string{"BatchGetDocuments"}},
		{"Transaction", func() error {
			return client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
				if _, err := tx.Get(doc); err != nil {
					return err
				}
				return tx.Set(doc, map[string]any{"n": 2})
			})
		}, []string{"BeginTransaction", "BatchGetDocuments", "Commit"}},
		{"Query", func() error { _, err := client.Collection("things").Documents(ctx).GetAll(); return err }, []string{"RunQuery"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c.Take()
			if err := tc.do(); err != nil {
				t.Fatal(err)
			}
			if got := c.Take(); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("calls = %v, want %v", got, tc.want)
			}
		})
	}
}
