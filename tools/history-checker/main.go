// history-checker checks a client history recorded by the operator's end-to-end tests
// (crates/e2e-support/src/workload.rs) against etcd's guarantees: linearizability of
// every operation under a key-value model with revisions (porcupine, partitioned by key),
// revision order across keys, acknowledged writes kept, and the watch guarantees (ordered, no
// duplicates, no gaps across resumes, every event a write the history allows, progress never
// going back).
//
//	history-checker [-timeout 60s] [-visualize failure|always|never] [-out DIR] HISTORY.json
//
// It writes DIR/verdict.json (and DIR/visualization.html, porcupine's page of the history)
// and prints a summary. Exit status: 0 ok, 1 violations, 2 unknown (the linearizability check
// timed out and nothing else was found), 3 the history could not be read.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// sourceHash is stamped at build time (scripts/install-deps.sh): the digest of this
// directory's sources, so a test can tell a stale build from a current one.
var sourceHash = "unknown"

func main() {
	timeout := flag.Duration("timeout", 60*time.Second, "limit of the linearizability check; past it the verdict is unknown")
	visualizeMode := flag.String("visualize", "failure", "write visualization.html: failure, always or never")
	outDir := flag.String("out", "", "directory for verdict.json and visualization.html (default: the history's)")
	version := flag.Bool("version", false, "print the source digest this binary was built from")
	flag.Parse()
	if *version {
		fmt.Printf("history-checker %s\n", sourceHash)
		return
	}
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: history-checker [-timeout 60s] [-visualize failure|always|never] [-out DIR] HISTORY.json")
		os.Exit(3)
	}
	switch *visualizeMode {
	case "failure", "always", "never":
	default:
		fmt.Fprintf(os.Stderr, "history-checker: -visualize %q: say failure, always or never\n", *visualizeMode)
		os.Exit(3)
	}
	path := flag.Arg(0)
	h, err := loadHistory(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "history-checker: %s: %v\n", path, err)
		os.Exit(3)
	}
	dir := *outDir
	if dir == "" {
		dir = filepath.Dir(path)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "history-checker: %v\n", err)
		os.Exit(3)
	}
	report := check(h, options{timeout: *timeout, visualize: *visualizeMode, outDir: dir})
	verdict, _ := json.MarshalIndent(report, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "verdict.json"), append(verdict, '\n'), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "history-checker: writing the verdict: %v\n", err)
		os.Exit(3)
	}
	fmt.Println(report.summary())
	fmt.Print(report.details())
	if report.Visualization != "" {
		fmt.Printf("  visualization: %s\n", report.Visualization)
	}
	switch report.Result {
	case resultViolation:
		os.Exit(1)
	case resultUnknown:
		os.Exit(2)
	}
}
