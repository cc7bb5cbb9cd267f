package firestorestore_test

import (
	"testing"

	"github.com/fireonce/fireonce/shared/firestoretest"
	"github.com/fireonce/fireonce/shared/triggeronce/driver"
	"github.com/fireonce/fireonce/shared/triggeronce/drivertest"
	"github.com/fireonce/fireonce/shared/triggeronce/firestorestore"
)

func TestConformance(t *testing.T) {
	env := firestoretest.New(t)
	store := firestorestore.New(env.Client, nil)
	drivertest.RunConformanceTests(t, func(t *testing.T) driver.Store { return store })
}
