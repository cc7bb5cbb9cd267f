package devloop

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/fireonce/fireonce/shared/emulatorapi"
)

// DemoDeadToken is the device FCM reports unregistered in the demo.
const DemoDeadToken = "dave-old-phone"

// The demo's world: who exists, their devices, who follows whom, what they
// post. One device is dead: FCM reports it unregistered and the push
// function must prune it.
var (
	demoUsers   = []string{"alice", "bob", "carol", "dave"}
	demoDevices = map[string][]string{
		"alice": {"alice-phone"},
		"bob":   {"bob-phone", "bob-tablet"},
		"carol": {"carol-phone"},
		"dave":  {"dave-phone", "dave-old-phone"},
	}
	demoFollows = map[string][]string{ // followed -> followers
		"alice": {"bob", "carol", "dave"},
		"bob":   {"alice", "carol"},
		"carol": {"dave"},
	}
	demoPosts = map[string][]string{
		"alice": {"a1", "a2", "a3"},
		"bob":   {"b1", "b2"},
		"carol": {"c1"},
	}
	demoDeleted = map[string]string{"a2": "alice"} // post -> author
)

// Check is one expectation of the demo and what was found.
type Check struct {
	Name string
	Got  string
	Want string
}

// OK reports whether the check passed.
func (c Check) OK() bool { return c.Got == c.Want }

// Summary is what the demo found.
type Summary struct {
	Events     map[string]int // by trigger
	Deliveries int
	ByStatus   map[int]int
	Retries    int
	Executions map[string]int // done markers by function
	Processing int            // markers left processing
	Checks     []Check
}

// OK reports whether every check passed.
func (s *Summary) OK() bool {
	for _, c := range s.Checks {
		if !c.OK() {
			return false
		}
	}
	return true
}

// Print writes the summary for people.
func (s *Summary) Print(w io.Writer) {
	total := func(m map[string]int) (n int) {
		for _, v := range m {
			n += v
		}
		return n
	}
	fmt.Fprintf(w, "\n=== fireonce demo summary ===\n")
	fmt.Fprintf(w, "events:                %d %v\n", total(s.Events), s.Events)
	fmt.Fprintf(w, "deliveries:            %d (by status %v, retries %d)\n", s.Deliveries, s.ByStatus, s.Retries)
	fmt.Fprintf(w, "executions:            %d %v\n", total(s.Executions), s.Executions)
	fmt.Fprintf(w, "duplicates suppressed: %d\n", s.Deliveries-total(s.Executions))
	fmt.Fprintf(w, "markers processing:    %d\n", s.Processing)
	for _, c := range s.Checks {
		mark := "ok  "
		if !c.OK() {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "%s %-40s got %-8s want %s\n", mark, c.Name, c.Got, c.Want)
	}
	if s.OK() {
		fmt.Fprintln(w, "all checks passed: every effect ran exactly once")
	} else {
		fmt.Fprintln(w, "SOME CHECKS FAILED")
	}
}

// RunDemo writes the demo's world through the emulator's REST API as its
// users (so the security rules apply), creates posts, deletes one, waits for
// the functions to settle, and checks counters, pushes and markers. The
// error is for what kept the demo from running; disagreements are failed
// checks in the Summary.
func (l *Loop) RunDemo(ctx context.Context, progress io.Writer) (*Summary, error) {
	api := l.api
	step := func(format string, args ...any) { fmt.Fprintf(progress, "demo: "+format+"\n", args...) }
	write := func(r *emulatorapi.Response, err error) error {
		if err != nil {
			return err
		}
		return r.Err()
	}

	step("writing %d users with their devices and followers, as themselves", len(demoUsers))
	for _, u := range demoUsers {
		if err := write(api.As(u).Create(ctx, "users", u, map[string]any{"displayName": strings.ToUpper(u[:1]) + u[1:]})); err != nil {
			return nil, fmt.Errorf("create user %s: %w", u, err)
		}
		for _, t := range demoDevices[u] {
			if err := write(api.As(u).Create(ctx, "users/"+u+"/fcmTokens", t, map[string]any{"createdAt": emulatorapi.ServerTime})); err != nil {
				return nil, fmt.Errorf("register device %s: %w", t, err)
			}
		}
	}
	for followed, followers := range demoFollows {
		for _, f := range followers {
			if err := write(api.As(f).Create(ctx, "users/"+followed+"/followers", f, map[string]any{"createdAt": emulatorapi.ServerTime})); err != nil {
				return nil, fmt.Errorf("%s follows %s: %w", f, followed, err)
			}
		}
	}

	s := &Summary{}
	// The rules keep postCount to the functions.
	r, err := api.As("bob").Patch(ctx, "users/alice", map[string]any{"postCount": 100}, nil)
	if err != nil {
		return nil, err
	}
	s.Checks = append(s.Checks, Check{Name: "rules: bob sets alice's postCount", Got: fmt.Sprint(r.StatusCode), Want: "403"})
	r, err = api.As("alice").Patch(ctx, "users/alice", map[string]any{"postCount": 100}, nil)
	if err != nil {
		return nil, err
	}
	s.Checks = append(s.Checks, Check{Name: "rules: alice sets her own postCount", Got: fmt.Sprint(r.StatusCode), Want: "403"})

	created := 0
	for _, author := range slices.Sorted(maps.Keys(demoPosts)) {
		for i, p := range demoPosts[author] {
			step("%s posts %s", author, p)
			fields := map[string]any{"title": fmt.Sprintf("%s's post #%d", author, i+1), "body": "Hello from the fireonce demo.", "createdAt": emulatorapi.ServerTime}
			if err := write(api.As(author).Create(ctx, "users/"+author+"/posts", p, fields)); err != nil {
				return nil, fmt.Errorf("create post %s: %w", p, err)
			}
			created++
		}
	}
	// Events are not ordered: let the creates settle before a delete, as a
	// person deleting a post would.
	if err := l.settle(ctx, map[string]int{"sendPostNotification": created, "incrementPostCount": created}); err != nil {
		return nil, err
	}
	for post, author := range demoDeleted {
		step("%s deletes %s", author, post)
		if err := write(api.As(author).Delete(ctx, "users/"+author+"/posts/"+post)); err != nil {
			return nil, fmt.Errorf("delete post %s: %w", post, err)
		}
	}
	want := map[string]int{"sendPostNotification": created, "incrementPostCount": created, "decrementPostCount": len(demoDeleted)}
	if err := l.settle(ctx, want); err != nil {
		return nil, err
	}
	return s, l.check(ctx, s, want)
}

// settle waits until the bridge has received want events per trigger and
// every delivery, duplicate and retry is over.
func (l *Loop) settle(ctx context.Context, want map[string]int) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		got := l.bridge.Stats().EventsByTrigger
		done := true
		for k, n := range want {
			if got[k] < n {
				done = false
			}
		}
		if done {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devloop: waiting for events %v, have %v: %w", want, got, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return l.bridge.Idle(ctx)
}

func (l *Loop) check(ctx context.Context, s *Summary, wantEvents map[string]int) error {
	admin := l.api.Admin()
	st := l.bridge.Stats()
	s.Events, s.Deliveries, s.ByStatus, s.Retries = st.EventsByTrigger, st.Deliveries, st.ByStatus, st.Retries
	for _, fn := range slices.Sorted(maps.Keys(wantEvents)) {
		s.Checks = append(s.Checks, Check{Name: "events for " + fn, Got: fmt.Sprint(st.EventsByTrigger[fn]), Want: fmt.Sprint(wantEvents[fn])})
	}

	// Executions: a done marker is an effect that ran (and, for the
	// counters, committed with it).
	resp, err := admin.List(ctx, "triggerEvents")
	if err != nil {
		return err
	}
	markers, err := resp.Documents()
	if err != nil {
		return fmt.Errorf("list markers: %w", err)
	}
	s.Executions = map[string]int{}
	for _, m := range markers {
		fn, _ := m.Fields["function"].(string)
		switch m.Fields["state"] {
		case "done":
			s.Executions[fn]++
		case "processing":
			s.Processing++
		}
	}
	for _, fn := range slices.Sorted(maps.Keys(wantEvents)) {
		s.Checks = append(s.Checks, Check{Name: "executions of " + fn, Got: fmt.Sprint(s.Executions[fn]), Want: fmt.Sprint(wantEvents[fn])})
	}
	s.Checks = append(s.Checks, Check{Name: "markers left processing", Got: fmt.Sprint(s.Processing), Want: "0"})

	// Counters against the posts that exist.
	for _, u := range demoUsers {
		posts, err := admin.List(ctx, "users/"+u+"/posts")
		if err != nil {
			return err
		}
		docs, err := posts.Documents()
		if err != nil {
			return fmt.Errorf("list posts of %s: %w", u, err)
		}
		user, err := admin.Get(ctx, "users/"+u)
		if err != nil {
			return err
		}
		doc, err := user.Document()
		if err != nil {
			return fmt.Errorf("read user %s: %w", u, err)
		}
		got := fmt.Sprint(doc.Fields["postCount"])
		if doc.Fields["postCount"] == nil {
			got = "0"
		}
		s.Checks = append(s.Checks, Check{Name: "postCount of " + u, Got: got, Want: fmt.Sprint(len(docs))})
	}

	// Pushes per device against who follows whom.
	wantPushes := map[string]int{}
	for author, posts := range demoPosts {
		for _, f := range demoFollows[author] {
			for _, t := range demoDevices[f] {
				if t != DemoDeadToken {
					wantPushes[t] += len(posts)
				}
			}
		}
	}
	for _, u := range demoUsers {
		for _, t := range demoDevices[u] {
			s.Checks = append(s.Checks, Check{Name: "pushes to " + t, Got: fmt.Sprint(l.fcm.PushesTo(t)), Want: fmt.Sprint(wantPushes[t])})
		}
	}
	dead, err := admin.Get(ctx, "users/dave/fcmTokens/"+DemoDeadToken)
	if err != nil {
		return err
	}
	s.Checks = append(s.Checks, Check{Name: "dead device pruned (GET status)", Got: fmt.Sprint(dead.StatusCode), Want: "404"})
	return nil
}
