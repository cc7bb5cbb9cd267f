package redisstore_test

import (
	"testing"

	"github.com/fireonce/fireonce/shared/triggeronce/driver"
	"github.com/fireonce/fireonce/shared/triggeronce/drivertest"
	"github.com/fireonce/fireonce/shared/triggeronce/redisstore"
	"github.com/fireonce/fireonce/shared/triggeronce/redisstore/redistest"
)

func TestConformance(t *testing.T) {
	c := redistest.Shared(t)
	store := redisstore.New(c, &redisstore.Options{Prefix: redistest.Prefix(t)})
	drivertest.RunConformanceTests(t, func(t *testing.T) driver.Store { return store })
}
