package bench

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
)

// schedule is what a round runs, in a new order every round, so that no
// case always follows the same one.
type schedule struct {
	units []interface {
		round(ctx context.Context, r int) error
	}
	order *mrand.Rand
}

// units puts every latency case into one unit that interleaves them
// delivery by delivery, and each throughput case into one with its
// baseline, so that the two run back to back in every round (a slice of HTTP
// events lasts long enough for a burst of someone else's load to fall on
// one variant only). Storms are units of their own.
func units(cases []benchCase, order *mrand.Rand) schedule {
	s := schedule{order: order}
	lat := &interleaved{order: order}
	groups := map[string]*group{}
	for _, c := range cases {
		switch c := c.(type) {
		case *latencyCase:
			if len(lat.cases) == 0 {
				s.units = append(s.units, lat)
			}
			lat.cases = append(lat.cases, c)
		case *throughputCase:
			if g, ok := groups[c.Baseline]; ok {
				g.cases = append(g.cases, c)
				continue
			}
			g := &group{cases: []benchCase{c}, order: order}
			groups[c.ID] = g
			s.units = append(s.units, g)
		default:
			s.units = append(s.units, &group{cases: []benchCase{c}, order: order})
		}
	}
	return s
}

// group runs its cases' rounds one after the other, in a random order.
type group struct {
	cases []benchCase
	order *mrand.Rand
}

func (g *group) round(ctx context.Context, r int) error {
	for _, i := range g.order.Perm(len(g.cases)) {
		if err := g.cases[i].round(ctx, r); err != nil {
			return fmt.Errorf("bench: %s: %w", g.cases[i].res().ID, err)
		}
	}
	return nil
}

// interleaved runs latency cases one delivery each in turn, in a new order
// every turn: deliveries compared with each other are milliseconds apart and
// share whatever load the machine has.
type interleaved struct {
	cases []*latencyCase
	order *mrand.Rand
}

func (l *interleaved) round(ctx context.Context, r int) error {
	for range share(l.cases[0].total, l.cases[0].rounds, r) {
		for _, i := range l.order.Perm(len(l.cases)) {
			l.cases[i].step(ctx)
		}
	}
	return nil
}

// share is how many of total items fall into round r of rounds.
func share(total, rounds, r int) int {
	return total*(r+1)/rounds - total*r/rounds
}
