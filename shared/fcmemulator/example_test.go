package fcmemulator_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"

	firebase "firebase.google.com/go/v4"
	"firebase.google.com/go/v4/messaging"
	"google.golang.org/api/option"

	"github.com/fireonce/fireonce/shared/fcmemulator"
)

// The real messaging client, pointed at the stand-in.
func Example() {
	fcm := fcmemulator.New(&fcmemulator.Options{Unregistered: []string{"old-phone"}})
	ts := httptest.NewServer(fcm.Handler())
	defer ts.Close()

	ctx := context.Background()
	app, err := firebase.NewApp(ctx, &firebase.Config{ProjectID: "demo-x"},
		option.WithEndpoint(ts.URL+"/v1"), option.WithoutAuthentication())
	if err != nil {
		log.Fatal(err)
	}
	client, err := app.Messaging(ctx)
	if err != nil {
		log.Fatal(err)
	}
	br, err := client.SendEachForMulticast(ctx, &messaging.MulticastMessage{
		Tokens:       []string{"phone", "old-phone"},
		Notification: &messaging.Notification{Title: "New post from Ada", Body: "Hello"},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(br.SuccessCount, messaging.IsUnregistered(br.Responses[1].Error))
	fmt.Println(fcm.PushesTo("phone"), fcm.Messages()[0].Title)
	// Output:
	// 1 true
	// 1 New post from Ada
}
