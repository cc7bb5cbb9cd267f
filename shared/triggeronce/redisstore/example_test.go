package redisstore_test

import (
	"github.com/fireonce/fireonce/shared/triggeronce/redisstore"
	"github.com/redis/go-redis/v9"
)

// A store on Memorystore for Redis (or any single Redis); for Memorystore
// for Redis Cluster pass a redis.NewClusterClient instead. Hand the store to
// triggeronce.New to guard effects with it.
func Example() {
	client := redis.NewClient(&redis.Options{Addr: "10.0.0.3:6379"})
	store := redisstore.New(client, &redisstore.Options{Prefix: "myapp:trigger:"})
	_ = store
}
