package functions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"firebase.google.com/go/v4/errorutils"
	"firebase.google.com/go/v4/messaging"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fireonce/fireonce/shared/firestoreevent"
	"github.com/fireonce/fireonce/shared/triggeronce"
)

const (
	// multicastLimit is FCM's limit on tokens per SendEachForMulticast.
	multicastLimit = 500
	// pageSize bounds every read of followers and of a follower's tokens.
	pageSize = 300
	// tokenReaders bounds the concurrent reads of followers' tokens.
	tokenReaders = 16
	// bodyLimit is how many characters of the post title the body carries.
	bodyLimit = 100
	// receiptsCollection, under a push's marker document, records the
	// devices a failed attempt reached, so its retry skips them. It has a
	// TTL policy on expireAt (firestore.indexes.json).
	receiptsCollection = "pushReceipts"
	// markerCollection is the guard's default marker collection.
	markerCollection = "triggerEvents"
	// receiptRetention matches the guard's marker retention.
	receiptRetention = triggeronce.DefaultRetention
)

// errTransientPush is wrapped when some devices could not be reached for a
// reason a retry may fix.
var errTransientPush = errors.New("functions: transient FCM failure")

// post is the part of users/{userID}/posts/{postID} the push reads.
type post struct {
	Title string `firestore:"title"`
}

// sendPostNotification pushes the new post to every device of every
// follower of its author, under Guard.Run: a duplicate delivery sends
// nothing, a failed attempt releases its claim and the retry sends only to
// the devices the failed attempt did not reach.
func (s *Service) sendPostNotification(ctx context.Context, d *Deps, inv *invocation) error {
	var p post
	if err := inv.event.After.DataTo(&p); err != nil {
		// A post the rules would never let in: no retry can fix it.
		inv.report.outcome = outcomeRejected
		return fmt.Errorf("%w: post data: %v", firestoreevent.ErrMalformed, err)
	}
	key, meta := inv.key("sendPostNotification")
	push := &pusher{s: s, d: d, inv: inv, key: key, title: p.Title}
	outcome, err := d.PushGuard.Run(ctx, key, meta, push.run)
	inv.report.outcome = outcome
	return err
}

// pusher is one attempt at sending one post's notifications.
type pusher struct {
	s     *Service
	d     *Deps
	inv   *invocation
	key   triggeronce.Key
	title string

	msg      messaging.MulticastMessage
	receipts map[string]bool     // token hashes reached by earlier attempts
	owners   map[string][]string // token -> follower IDs, for pruning
	pending  []string            // tokens waiting for the next multicast
	reached  []string            // tokens reached by this attempt
	failed   error               // first transient failure of this attempt
}

func (p *pusher) run(ctx context.Context) error {
	userID, postID := p.inv.params["userID"], p.inv.params["postID"]
	name, err := p.displayName(ctx, userID)
	if err != nil {
		return err
	}
	p.msg = messaging.MulticastMessage{
		Notification: &messaging.Notification{
			Title: "New post from " + name,
			Body:  truncate(p.title, bodyLimit),
		},
		Data: map[string]string{"userID": userID, "postID": postID},
	}
	if p.receipts, err = p.loadReceipts(ctx); err != nil {
		return err
	}
	p.owners = map[string][]string{}
	err = p.eachFollowerPage(ctx, userID, func(followers []string) error {
		tokens, err := p.tokensOf(ctx, followers)
		if err != nil {
			return err
		}
		for _, t := range tokens {
			if err := p.add(ctx, t); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = p.flush(ctx)
	}
	if err == nil {
		err = p.failed
	}
	if err != nil && len(p.reached) > 0 {
		// The claim is about to be released; remember who got the push so
		// the retry does not send it to them again.
		if rerr := p.saveReceipts(ctx); rerr != nil {
			p.s.logger.WarnContext(ctx, "push receipts not saved: the retry may push these devices again",
				"eventID", p.key.EventID, "devices", len(p.reached), "error", rerr.Error())
		}
	}
	return err
}

func (p *pusher) displayName(ctx context.Context, userID string) (string, error) {
	snap, err := p.d.Firestore.Collection("users").Doc(userID).Get(ctx)
	if status.Code(err) == codes.NotFound {
		return "someone you follow", nil
	}
	if err != nil {
		return "", fmt.Errorf("read author %s: %w", userID, err)
	}
	if name, _ := snap.Data()["displayName"].(string); name != "" {
		return name, nil
	}
	return "someone you follow", nil
}

// eachFollowerPage calls fn with the follower IDs of userID, a bounded page
// at a time, in document ID order.
func (p *pusher) eachFollowerPage(ctx context.Context, userID string, fn func([]string) error) error {
	return eachIDPage(ctx, p.d.Firestore.Collection("users").Doc(userID).Collection("followers"), fn)
}

// eachIDPage pages through the document IDs of coll without reading their
// fields.
func eachIDPage(ctx context.Context, coll *firestore.CollectionRef, fn func([]string) error) error {
	q := coll.Query
	q = q.Select().OrderBy(firestore.DocumentID, firestore.Asc).Limit(pageSize)
	var after *firestore.DocumentSnapshot
	for {
		page := q
		if after != nil {
			page = q.StartAfter(after)
		}
		snaps, err := page.Documents(ctx).GetAll()
		if err != nil {
			return fmt.Errorf("read %s: %w", coll.Path, err)
		}
		if len(snaps) == 0 {
			return nil
		}
		ids := make([]string, len(snaps))
		for i, s := range snaps {
			ids[i] = s.Ref.ID
		}
		if err := fn(ids); err != nil {
			return err
		}
		if len(snaps) < pageSize {
			return nil
		}
		after = snaps[len(snaps)-1]
	}
}

// tokensOf reads the device tokens of followers, a few followers at a time,
// and returns them in follower order.
func (p *pusher) tokensOf(ctx context.Context, followers []string) ([]string, error) {
	perFollower := make([][]string, len(followers))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(tokenReaders)
	for i, f := range followers {
		g.Go(func() error {
			return eachIDPage(gctx, p.d.Firestore.Collection("users").Doc(f).Collection("fcmTokens"), func(ids []string) error {
				perFollower[i] = append(perFollower[i], ids...)
				return nil
			})
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var tokens []string
	for i, ts := range perFollower {
		for _, t := range ts {
			owners, seen := p.owners[t]
			// Every owner's copy of a dead token must be pruned.
			p.owners[t] = append(owners, followers[i])
			if seen {
				continue // one device of two followers gets one push
			}
			tokens = append(tokens, t)
		}
	}
	return tokens, nil
}

func (p *pusher) add(ctx context.Context, token string) error {
	if p.receipts[receiptID(token)] {
		return nil
	}
	p.pending = append(p.pending, token)
	if len(p.pending) == multicastLimit {
		return p.flush(ctx)
	}
	return nil
}

// flush sends the pending tokens in one multicast. Dead tokens are deleted;
// a transient failure is remembered and the attempt goes on, so one attempt
// reaches as many devices as it can.
func (p *pusher) flush(ctx context.Context) error {
	if len(p.pending) == 0 {
		return nil
	}
	tokens := p.pending
	p.pending = nil
	msg := p.msg
	msg.Tokens = tokens
	resp, err := p.d.Messaging.SendEachForMulticast(ctx, &msg)
	if err != nil {
		return fmt.Errorf("%w: multicast to %d devices: %v", errTransientPush, len(tokens), err)
	}
	var dead []string
	for i, r := range resp.Responses {
		if i >= len(tokens) {
			break
		}
		t := tokens[i]
		switch {
		case r.Success:
			p.reached = append(p.reached, t)
			p.inv.report.sent++
		case messaging.IsUnregistered(r.Error) || messaging.IsInvalidArgument(r.Error):
			dead = append(dead, t)
		case transient(r.Error):
			if p.failed == nil {
				p.failed = fmt.Errorf("%w: %v", errTransientPush, r.Error)
			}
		default:
			// Sender mismatch, auth errors: a retry cannot fix them, and
			// failing the event would resend to every healthy device.
			p.s.logger.ErrorContext(ctx, "push failed permanently; not retried",
				"eventID", p.key.EventID, "followers", p.owners[t], "error", r.Error.Error())
		}
	}
	return p.prune(ctx, dead)
}

func transient(err error) bool {
	return messaging.IsUnavailable(err) || messaging.IsInternal(err) || messaging.IsQuotaExceeded(err) ||
		// The messaging predicates need an FCM error detail, which a
		// gateway's 502 or 504, a 429 without details or a transport error
		// (after the client's own retries) do not carry; only their platform
		// code says they are transient. (messaging.IsUnknown is always
		// false.)
		errorutils.IsUnavailable(err) || errorutils.IsInternal(err) || errorutils.IsUnknown(err) ||
		errorutils.IsResourceExhausted(err) || errorutils.IsDeadlineExceeded(err) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// prune deletes the token documents FCM reported dead, under every follower
// that has the token.
func (p *pusher) prune(ctx context.Context, tokens []string) error {
	var docs []*firestore.DocumentRef
	for _, t := range tokens {
		for _, owner := range p.owners[t] {
			docs = append(docs, p.d.Firestore.Collection("users").Doc(owner).Collection("fcmTokens").Doc(t))
		}
	}
	for start := 0; start < len(docs); start += multicastLimit {
		chunk := docs[start:min(start+multicastLimit, len(docs))]
		b := p.d.Firestore.Batch()
		for _, d := range chunk {
			b.Delete(d)
		}
		if _, err := b.Commit(ctx); err != nil {
			return fmt.Errorf("prune %d dead token documents: %w", len(chunk), err)
		}
		p.inv.report.pruned += len(chunk)
	}
	return nil
}

func (p *pusher) receiptsRef() *firestore.CollectionRef {
	return p.d.Firestore.Collection(markerCollection).Doc(p.key.ID()).Collection(receiptsCollection)
}

func (p *pusher) loadReceipts(ctx context.Context) (map[string]bool, error) {
	got := map[string]bool{}
	err := eachIDPage(ctx, p.receiptsRef(), func(ids []string) error {
		for _, id := range ids {
			got[id] = true
		}
		return nil
	})
	return got, err
}

func (p *pusher) saveReceipts(ctx context.Context) error {
	expireAt := time.Now().Add(receiptRetention)
	for start := 0; start < len(p.reached); start += multicastLimit {
		b := p.d.Firestore.Batch()
		for _, t := range p.reached[start:min(start+multicastLimit, len(p.reached))] {
			b.Set(p.receiptsRef().Doc(receiptID(t)), map[string]any{"expireAt": expireAt})
		}
		if _, err := b.Commit(context.WithoutCancel(ctx)); err != nil {
			return err
		}
	}
	return nil
}

// receiptID names a device in the receipts without storing its token.
func receiptID(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:16])
}

// truncate cuts s to at most n characters (runes, not bytes).
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}
