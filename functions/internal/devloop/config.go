package devloop

import (
	"encoding/json"
	"fmt"
	"os"
)

// Ports are where the dev loop listens. Zero ports are picked free (tests).
type Ports struct {
	// Firestore emulator (HTTP and gRPC) and its websocket.
	FirestoreHost string
	FirestorePort int
	WebsocketPort int
	// Functions is the functions-framework server hosting every function
	// at /<name>.
	FunctionsHost string
	FunctionsPort int
	// Bridge receives the emulator's deliveries (it is the "functions
	// emulator" the Firestore emulator calls) and also serves the FCM
	// stand-in under /v1/.
	BridgeHost string
	BridgePort int
}

// firebaseJSON is the part of firebase.json the dev loop reads.
type firebaseJSON struct {
	Emulators struct {
		Firestore struct {
			Host          string `json:"host"`
			Port          int    `json:"port"`
			WebsocketPort int    `json:"websocketPort"`
		} `json:"firestore"`
		Functions struct {
			Host string `json:"host"`
			Port int    `json:"port"`
		} `json:"functions"`
		// Eventarc is what delivers events to functions in production,
		// which is the bridge's job here.
		Eventarc struct {
			Host string `json:"host"`
			Port int    `json:"port"`
		} `json:"eventarc"`
	} `json:"emulators"`
}

// PortsFromFirebaseJSON reads the emulator ports from firebase.json:
// emulators.firestore (host, port, websocketPort), emulators.functions (the
// functions server) and emulators.eventarc (the bridge and the FCM
// stand-in). Hosts default to 127.0.0.1; every port must be set.
func PortsFromFirebaseJSON(path string) (Ports, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Ports{}, fmt.Errorf("devloop: %w", err)
	}
	var fj firebaseJSON
	if err := json.Unmarshal(b, &fj); err != nil {
		return Ports{}, fmt.Errorf("devloop: parse %s: %w", path, err)
	}
	e := fj.Emulators
	p := Ports{
		FirestoreHost: orLoopback(e.Firestore.Host), FirestorePort: e.Firestore.Port, WebsocketPort: e.Firestore.WebsocketPort,
		FunctionsHost: orLoopback(e.Functions.Host), FunctionsPort: e.Functions.Port,
		BridgeHost: orLoopback(e.Eventarc.Host), BridgePort: e.Eventarc.Port,
	}
	for name, port := range map[string]int{
		"emulators.firestore.port": p.FirestorePort, "emulators.firestore.websocketPort": p.WebsocketPort,
		"emulators.functions.port": p.FunctionsPort, "emulators.eventarc.port": p.BridgePort,
	} {
		if port <= 0 || port > 65535 {
			return Ports{}, fmt.Errorf("devloop: %s: %s is missing or out of range", path, name)
		}
	}
	return p, nil
}

func orLoopback(host string) string {
	if host == "" {
		return "127.0.0.1"
	}
	return host
}
