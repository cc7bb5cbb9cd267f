package emulatorapi_test

import (
	"context"
	"fmt"
	"os"

	"github.com/fireonce/fireonce/shared/emulatorapi"
)

// A post created as its author, with createdAt set to the request time so a
// rule "createdAt == request.time" holds, then read by an unauthenticated
// client. Not run: it needs an emulator.
func Example() {
	ctx := context.Background()
	c := emulatorapi.New(os.Getenv("FIRESTORE_EMULATOR_HOST"), "demo-example")
	r, err := c.As("alice").Create(ctx, "users/alice/posts", "p1", map[string]any{
		"title":     "Hello",
		"body":      "First post",
		"createdAt": emulatorapi.ServerTime,
	})
	if err != nil {
		panic(err) // transport failure: the emulator is not running
	}
	fmt.Println(r.StatusCode) // 200, or 403 when the rules deny it

	r, _ = c.As("").Get(ctx, "users/alice/posts/p1")
	fmt.Println(r.StatusCode, r.Status) // e.g. 403 PERMISSION_DENIED
}
