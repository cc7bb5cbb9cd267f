// Command bench runs fireonce's benchmarks (package bench) against
// the Firestore emulator at FIRESTORE_EMULATOR_HOST and, when
// FIREONCE_REDIS_ADDR or REDIS_URL is set, a redis-server; it prints one
// Markdown table to stdout and writes the same figures as JSON.
//
//	./scripts/bench.sh                      starts both, then runs this
//	go run ./functions/cmd/bench -out .bench/latest.json
//
// It exits 1 when a case failed a check (an effect run twice, a push
// missing, a delivery answered with an error).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/fireonce/fireonce/functions/internal/bench"
)

func main() {
	log.SetFlags(0)
	var cfg bench.Config
	out := flag.String("out", ".bench/latest.json", "write the JSON report here (empty: do not)")
	flag.IntVar(&cfg.Samples, "samples", 400, "samples per latency case")
	flag.IntVar(&cfg.Rounds, "rounds", 20, "interleaved rounds")
	flag.IntVar(&cfg.Warmup, "warmup", 100, "warm-up deliveries per case, dropped")
	flag.IntVar(&cfg.Users, "users", 1000, "users the events spread over")
	flag.IntVar(&cfg.Storms, "storms", 20, "duplicate storms per storm case")
	flag.IntVar(&cfg.StormSize, "storm-size", 64, "concurrent deliveries per storm")
	flag.IntVar(&cfg.Events, "events", 1200, "events per HTTP variant")
	flag.IntVar(&cfg.Concurrency, "concurrency", 16, "HTTP requests in flight")
	flag.BoolVar(&cfg.NoHTTP, "no-http", false, "skip the HTTP throughput cases")
	only := flag.String("only", "", "run only the cases whose ID matches this regexp (e.g. '^(1|2a)$')")
	flag.Parse()
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			log.Fatalf("bench: -only: %v", err)
		}
		cfg.Only = re
	}

	cfg.EmulatorHost = os.Getenv("FIRESTORE_EMULATOR_HOST")
	switch url, addr := os.Getenv("REDIS_URL"), os.Getenv("FIREONCE_REDIS_ADDR"); {
	case url != "":
		o, err := redis.ParseURL(url)
		if err != nil {
			log.Fatalf("bench: REDIS_URL: %v", err)
		}
		cfg.Redis = o
	case addr != "":
		cfg.Redis = &redis.Options{Addr: addr}
	default:
		log.Print("bench: neither REDIS_URL nor FIREONCE_REDIS_ADDR is set: skipping the Redis cases")
	}
	cfg.Progress = os.Stderr

	// functions-framework prints "Serving function" lines on stdout; keep
	// stdout for the table.
	table := os.Stdout
	os.Stdout = os.Stderr

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	rep.Command = strings.Join(append([]string{"./scripts/bench.sh"}, os.Args[1:]...), " ")
	if err := rep.WriteTable(table); err != nil {
		log.Fatal(err)
	}
	if *out != "" {
		if err := writeJSON(*out, rep); err != nil {
			log.Fatal(err)
		}
		fmt.Fprintf(os.Stderr, "bench: wrote %s\n", *out)
	}
	if rep.Failed() {
		log.Fatal("bench: a case failed its check (see the table)")
	}
}

func writeJSON(path string, rep *bench.Report) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := rep.WriteJSON(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
