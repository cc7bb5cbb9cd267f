package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// sample is one measured delivery (or storm).
type sample struct {
	d     time.Duration
	calls []string
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 1) in ms.
func percentile(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p+0.999999) - 1
	i = min(max(i, 0), len(s)-1)
	return float64(s[i]) / float64(time.Millisecond)
}

// fillLatency sets the sample count, percentiles, round trips per sample and
// the calls summary of res from samples.
func fillLatency(res *Result, samples []sample) {
	ds := make([]time.Duration, len(samples))
	calls := make([][]string, len(samples))
	for i, s := range samples {
		ds[i], calls[i] = s.d, s.calls
	}
	res.Samples = len(samples)
	res.P50Ms = percentile(ds, 0.50)
	res.P99Ms = percentile(ds, 0.99)
	res.RoundTrips, res.Calls = summarize(calls, len(samples))
}

// summarize returns the calls per unit over all of calls, and a description:
// the sequence when every entry made the same short one ("Commit +
// Commit"), else the mean count of each method per unit.
func summarize(calls [][]string, units int) (float64, string) {
	if units == 0 {
		return 0, ""
	}
	total := 0
	same := true
	var order []string
	count := map[string]int{}
	for _, cs := range calls {
		total += len(cs)
		same = same && slices.Equal(cs, calls[0])
		for _, c := range cs {
			if count[c] == 0 {
				order = append(order, c)
			}
			count[c]++
		}
	}
	perUnit := float64(total) / float64(units)
	if same && len(calls) == units && len(calls[0]) <= 4 {
		if len(calls[0]) == 0 {
			return 0, "none"
		}
		return perUnit, strings.Join(calls[0], " + ")
	}
	parts := make([]string, len(order))
	for i, m := range order {
		parts[i] = fmt.Sprintf("%s %s", trim(float64(count[m])/float64(units)), m)
	}
	return perUnit, strings.Join(parts, ", ")
}

// trim formats v with at most two decimals and no trailing zeros.
func trim(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}
