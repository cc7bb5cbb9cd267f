package functions

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"cloud.google.com/go/firestore"
	"firebase.google.com/go/v4/errorutils"
	"firebase.google.com/go/v4/messaging"
	"golang.org/x/sync/errgroup"

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
	receipts map[receipt]bool    // devices reached by earlier attempts
	owners   map[string][]string // token -> follower IDs, for pruning
	pending  []string            // tokens waiting for the next multicast
	reached  []string            // tokens reached by this attempt
	failed   error               // first transient failure of this attempt
}

func (p *pusher) run(ctx context.Context) error {
	userID, postID := p.inv.params["userID"], p.inv.params["postID"]
	name, err := p.loadAuthorAndReceipts(ctx, userID)
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

// loadAuthorAndReceipts reads the author's display name and the receipts of
// earlier attempts in one call: a first attempt finds no receipts, and
// costs no extra round trip for looking.
func (p *pusher) loadAuthorAndReceipts(ctx context.Context, userID string) (string, error) {
	author := p.d.Firestore.Collection("users").Doc(userID)
	snaps, err := p.d.Firestore.GetAll(ctx, []*firestore.DocumentRef{author, p.receiptsDoc(0)})
	if err != nil {
		return "", fmt.Errorf("read author %s and push receipts: %w", userID, err)
	}
	if p.receipts, err = p.readReceipts(ctx, snaps[1]); err != nil {
		return "", err
	}
	if snaps[0].Exists() {
		if name, _ := snaps[0].Data()["displayName"].(string); name != "" {
			return name, nil
		}
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
	if p.receipts[receiptOf(token)] {
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

// Receipts: the devices a failed attempt reached, so that its retry skips
// them. They are kept as 16-byte hashes of the tokens (no token is copied)
// packed into the bytes field "sent" of documents 0, 1, ... of
// pushReceipts under the push's marker; document 0 also says how many there
// are ("chunks"). A chunk holds receiptsPerDoc devices, within Firestore's
// 1 MiB document limit (a variable so a test can make chunks small).
var receiptsPerDoc = 60000

// receipt identifies a device without storing its token.
type receipt [16]byte

func receiptOf(token string) receipt {
	sum := sha256.Sum256([]byte(token))
	return receipt(sum[:16])
}

func (p *pusher) receiptsDoc(n int) *firestore.DocumentRef {
	return p.d.Firestore.Collection(markerCollection).Doc(p.key.ID()).
		Collection(receiptsCollection).Doc(strconv.Itoa(n))
}

// readReceipts decodes receipts document 0 (first, as read) and reads the
// others it names.
func (p *pusher) readReceipts(ctx context.Context, first *firestore.DocumentSnapshot) (map[receipt]bool, error) {
	got := map[receipt]bool{}
	if !first.Exists() {
		return got, nil
	}
	snaps := []*firestore.DocumentSnapshot{first}
	chunks, _ := first.Data()["chunks"].(int64)
	if chunks > 1 {
		refs := make([]*firestore.DocumentRef, 0, chunks-1)
		for n := 1; n < int(chunks); n++ {
			refs = append(refs, p.receiptsDoc(n))
		}
		more, err := p.d.Firestore.GetAll(ctx, refs)
		if err != nil {
			return nil, fmt.Errorf("read push receipts: %w", err)
		}
		snaps = append(snaps, more...)
	}
	for _, snap := range snaps {
		if !snap.Exists() {
			continue
		}
		sent, _ := snap.Data()["sent"].([]byte)
		for i := 0; i+len(receipt{}) <= len(sent); i += len(receipt{}) {
			got[receipt(sent[i:i+len(receipt{})])] = true
		}
	}
	return got, nil
}

// saveReceipts records every device reached so far, by earlier attempts and
// this one, replacing the receipts documents in one batch.
func (p *pusher) saveReceipts(ctx context.Context) error {
	all := maps.Clone(p.receipts)
	for _, t := range p.reached {
		all[receiptOf(t)] = true
	}
	sorted := slices.SortedFunc(maps.Keys(all), func(a, b receipt) int { return bytes.Compare(a[:], b[:]) })
	chunks := max(1, (len(sorted)+receiptsPerDoc-1)/receiptsPerDoc)
	expireAt := time.Now().Add(receiptRetention)
	b := p.d.Firestore.Batch()
	for n := range chunks {
		part := sorted[n*receiptsPerDoc : min((n+1)*receiptsPerDoc, len(sorted))]
		sent := make([]byte, 0, len(part)*len(receipt{}))
		for _, r := range part {
			sent = append(sent, r[:]...)
		}
		doc := map[string]any{"sent": sent, "expireAt": expireAt}
		if n == 0 {
			doc["chunks"] = chunks
		}
		b.Set(p.receiptsDoc(n), doc)
	}
	_, err := b.Commit(context.WithoutCancel(ctx))
	return err
}

// truncate cuts s to at most n characters (runes, not bytes).
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}
