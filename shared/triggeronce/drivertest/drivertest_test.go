package drivertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fireonce/fireonce/shared/triggeronce/driver"
)

// memStore is the smallest store that should pass the suite: it checks the
// suite itself, and shows implementers the semantics in a few lines.
type memStore struct {
	mu      sync.Mutex
	markers map[string]*memMarker
}

type memMarker struct {
	state    driver.State
	owner    string
	attempts int
	leaseEnd time.Time
}

func (s *memStore) Claim(_ context.Context, req driver.ClaimRequest) (driver.ClaimResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	id := req.Key.ID()
	m, ok := s.markers[id]
	switch {
	case !ok:
		m = &memMarker{}
		s.markers[id] = m
	case m.state == driver.StateDone:
		return driver.ClaimResult{Status: driver.Done}, nil
	case now.Before(m.leaseEnd):
		return driver.ClaimResult{Status: driver.InProgress, LeaseExpires: m.leaseEnd}, nil
	}
	status := driver.Claimed
	if ok {
		status = driver.TakenOver
	}
	m.state, m.owner, m.leaseEnd = driver.StateProcessing, req.Owner, now.Add(req.Lease)
	m.attempts++
	return driver.ClaimResult{Status: status, Attempts: m.attempts, LeaseExpires: m.leaseEnd}, nil
}

func (s *memStore) owned(key driver.Key, owner string) (*memMarker, error) {
	m, ok := s.markers[key.ID()]
	if !ok || m.state != driver.StateProcessing || m.owner != owner {
		return nil, driver.ErrNotOwner
	}
	return m, nil
}

func (s *memStore) Complete(_ context.Context, key driver.Key, owner string, _ time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.owned(key, owner)
	if err != nil {
		return err
	}
	m.state, m.leaseEnd = driver.StateDone, time.Time{}
	return nil
}

func (s *memStore) Release(_ context.Context, key driver.Key, owner string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.owned(key, owner); err != nil {
		return err
	}
	delete(s.markers, key.ID())
	return nil
}

func TestConformanceOnMemoryStore(t *testing.T) {
	shared := &memStore{markers: map[string]*memMarker{}}
	RunConformanceTests(t, func(t *testing.T) driver.Store { return shared })
}
