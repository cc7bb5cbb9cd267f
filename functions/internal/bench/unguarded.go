package bench

import (
	"context"
	"fmt"
	"strings"

	"cloud.google.com/go/firestore"
	"firebase.google.com/go/v4/messaging"
	"github.com/cloudevents/sdk-go/v2/event"
	"golang.org/x/sync/errgroup"

	"github.com/fireonce/fireonce/functions"
	"github.com/fireonce/fireonce/shared/firestoreevent"
)

// unguarded serves the three functions without the guard, for case 6's
// baseline: the same decoding and the same Firestore and FCM calls as the
// functions package makes, minus the guard's claim, completion and push
// receipts. It exists only here; production has no unguarded switch.
//
// Limits that the bench's data never reaches: one page of followers and of
// tokens (at most 300 each), one multicast (at most 500 devices).
type unguarded struct {
	fs  *firestore.Client
	msg functions.Messenger
}

var postPattern = firestoreevent.MustParsePattern(functions.PostDocument)

func (u *unguarded) handlers() map[string]func(context.Context, event.Event) error {
	return map[string]func(context.Context, event.Event) error{
		"sendPostNotification": u.sendPostNotification,
		"incrementPostCount":   u.incrementPostCount,
		"decrementPostCount":   u.decrementPostCount,
	}
}

func decode(e event.Event, want string) (*firestoreevent.Event, string, error) {
	ev, err := firestoreevent.Decode(e)
	if err != nil {
		return nil, "", err
	}
	if strings.TrimSuffix(ev.Type, ".withAuthContext") != want {
		return nil, "", fmt.Errorf("%w: got %s, want %s", firestoreevent.ErrMalformed, ev.Type, want)
	}
	params, err := ev.Params(postPattern)
	if err != nil {
		return nil, "", err
	}
	return ev, params["userID"], nil
}

func (u *unguarded) incrementPostCount(ctx context.Context, e event.Event) error {
	_, user, err := decode(e, functions.EventCreated)
	if err != nil {
		return err
	}
	_, err = u.fs.Collection("users").Doc(user).Set(ctx, increment(), firestore.MergeAll)
	return err
}

func (u *unguarded) decrementPostCount(ctx context.Context, e event.Event) error {
	_, user, err := decode(e, functions.EventDeleted)
	if err != nil {
		return err
	}
	return u.fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		return decrement(tx, u.fs.Collection("users").Doc(user))
	})
}

func (u *unguarded) sendPostNotification(ctx context.Context, e event.Event) error {
	ev, userID, err := decode(e, functions.EventCreated)
	if err != nil {
		return err
	}
	var p struct {
		Title string `firestore:"title"`
	}
	if err := ev.After.DataTo(&p); err != nil {
		return err
	}
	users := u.fs.Collection("users")
	author, err := users.Doc(userID).Get(ctx)
	if err != nil {
		return err
	}
	name, _ := author.Data()["displayName"].(string)
	follows, err := ids(ctx, users.Doc(userID).Collection("followers"))
	if err != nil {
		return err
	}
	perFollower := make([][]string, len(follows))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, f := range follows {
		g.Go(func() (err error) {
			perFollower[i], err = ids(gctx, users.Doc(f).Collection("fcmTokens"))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	var tokens []string
	for _, ts := range perFollower {
		tokens = append(tokens, ts...)
	}
	if len(tokens) == 0 {
		return nil
	}
	_, err = u.msg.SendEachForMulticast(ctx, &messaging.MulticastMessage{
		Tokens:       tokens,
		Notification: &messaging.Notification{Title: "New post from " + name, Body: p.Title},
		Data:         map[string]string{"userID": userID, "postID": ev.After.ID},
	})
	return err
}

// ids reads one page of document IDs, as the functions do.
func ids(ctx context.Context, coll *firestore.CollectionRef) ([]string, error) {
	snaps, err := coll.Select().OrderBy(firestore.DocumentID, firestore.Asc).Limit(300).Documents(ctx).GetAll()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(snaps))
	for i, s := range snaps {
		out[i] = s.Ref.ID
	}
	return out, nil
}
