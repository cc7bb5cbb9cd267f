// Command functable prints the functions table, the single source of truth
// for function names, event types and document patterns, for scripts:
//
//	go run ./functions/cmd/functable           # JSON array
//	go run ./functions/cmd/functable -format=tsv   # name<TAB>eventType<TAB>document per line
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/fireonce/fireonce/functions"
)

func main() {
	format := flag.String("format", "json", "output format: json or tsv")
	flag.Parse()
	if err := write(os.Stdout, *format); err != nil {
		fmt.Fprintln(os.Stderr, "functable:", err)
		os.Exit(2)
	}
}

func write(w io.Writer, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(functions.Table())
	case "tsv":
		for _, f := range functions.Table() {
			if _, err := fmt.Fprintf(w, "%s\t%s\t%s\n", f.Name, f.EventType, f.Document); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unknown -format %q (want json or tsv)", format)
}
