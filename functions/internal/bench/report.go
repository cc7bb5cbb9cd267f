package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// WriteTable writes the report as a Markdown table, with the run's settings
// and the note on where the figures come from.
func (r *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "fireonce bench, %s, %s, %d CPUs, %s; %.0f s\n", r.Started.Format("2006-01-02 15:04 MST"),
		r.Platform, r.CPUs, r.GoVersion, r.Seconds)
	fmt.Fprintf(&b, "%d samples per latency case in %d interleaved rounds after %d warm-up deliveries; "+
		"%d users; %d storms of %d; %d events per HTTP variant, %d in flight.\n",
		c.Samples, c.Rounds, c.Warmup, c.Users, c.Storms, c.StormSize, c.Events, c.Concurrency)
	fmt.Fprintf(&b, "%s\n\n", r.Note)
	b.WriteString("| case | what | backend | n | p50 ms | p99 ms | round trips / event | calls | p50 ÷ baseline | events/s | check |\n")
	b.WriteString("|---|---|---|--:|--:|--:|--:|---|--:|--:|---|\n")
	for _, x := range r.Cases {
		ratio := ""
		if x.RatioP50 > 0 {
			ratio = fmt.Sprintf("%.2f× (%s)", x.RatioP50, x.Baseline)
		}
		eps := ""
		if x.EventsPerSec > 0 {
			eps = fmt.Sprintf("%.0f", x.EventsPerSec)
			if x.ThroughputRatio > 0 {
				eps += fmt.Sprintf(" (%.2f×)", x.ThroughputRatio)
			}
		}
		check := x.Check
		if x.Errors > 0 {
			check += fmt.Sprintf("; %d errors, first: %s", x.Errors, x.FirstError)
		}
		n := fmt.Sprint(x.Samples)
		if x.Unit != "delivery" {
			n += "×" + strings.TrimPrefix(x.Unit, "storm of ") // storms × deliveries
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %.2f | %.2f | %s | %s | %s | %s | %s |\n",
			x.ID, x.Name, x.Backend, n, x.P50Ms, x.P99Ms, trim(x.RoundTrips), x.Calls, ratio, eps, check)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
