package triggeronce

import (
	"context"
	"errors"
	"log/slog"

	"github.com/cloudevents/sdk-go/v2/event"
)

// CloudEvent adapts handler to functions-framework-go's CloudEvent signature,
// guarding it with g.Run keyed on the event's ID and functionName (meta from
// its type and subject). Register the result with
// functions.CloudEvent(functionName, ...).
//
// What it returns decides whether the platform retries: the handler's error
// and store errors (and ErrInProgress under InProgressRetry) come back, so a
// retry runs the effect; a duplicate, an event without an ID (logged and
// dropped, no marker written) and ErrNotCompleted (the effect ran; a retry
// would repeat it) return nil.
//
// The handler runs after the claim. Validate the event before claiming when
// garbage must not cost a marker write: decode it first and call g.Run
// yourself, returning nil for what no retry can fix.
func CloudEvent(g *Guard, functionName string, handler func(context.Context, event.Event) error) func(context.Context, event.Event) error {
	if functionName == "" {
		panic("triggeronce: CloudEvent needs a function name")
	}
	return func(ctx context.Context, e event.Event) error {
		if e.ID() == "" {
			g.log.WarnContext(ctx, "triggeronce: dropping an event without an ID",
				slog.String("function", functionName), slog.String("type", e.Type()), slog.String("subject", e.Subject()))
			return nil
		}
		key := Key{EventID: e.ID(), Function: functionName}
		_, err := g.Run(ctx, key, Meta{EventType: e.Type(), Subject: e.Subject()}, func(ctx context.Context) error {
			return handler(ctx, e)
		})
		if errors.Is(err, ErrNotCompleted) {
			return nil
		}
		return err
	}
}
