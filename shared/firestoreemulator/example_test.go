package firestoreemulator_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/fireonce/fireonce/shared/firestoreemulator"
)

// An emulator of its own, delivering trigger events to a local bridge.
func ExampleStart() {
	emu, err := firestoreemulator.Start(context.Background(), &firestoreemulator.Options{
		ProjectID:         "demo-fireonce",
		RulesFile:         "firestore.rules",
		FunctionsEmulator: "127.0.0.1:9299",
		Log:               os.Stderr,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Stop()
	fmt.Println("FIRESTORE_EMULATOR_HOST=" + emu.Host())
}
