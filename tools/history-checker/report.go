package main

import (
	"fmt"
	"strings"
)

// Kinds of violation, as the verdict names them.
const (
	kindNotLinearizable    = "not-linearizable"
	kindRevisionOrder      = "revision-order"
	kindRevisionReused     = "revision-reused"
	kindLostWrite          = "lost-write"
	kindFailedWriteApplied = "failed-write-applied"
	kindWatchOrder         = "watch-order"
	kindWatchDuplicate     = "watch-duplicate"
	kindWatchGap           = "watch-gap"
	kindWatchProgress      = "watch-progress"
	kindWatchUnknownWrite  = "watch-unknown-write"
	kindWatchMismatch      = "watch-mismatch"
	kindWatchIncomplete    = "watch-incomplete"
)

// Results, as the verdict and the exit code say them.
const (
	resultOK        = "ok"        // exit 0
	resultViolation = "violation" // exit 1
	resultUnknown   = "unknown"   // exit 2: the linearizability check timed out; nothing else found
)

type Violation struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// Report is the verdict, written as verdict.json.
type Report struct {
	Label  string `json:"label"`
	Result string `json:"result"`
	// Linearizability: ok, illegal, unknown (timed out), or skipped (writes were lost and the
	// scenario allows it: the history before and after the loss is not one linearizable
	// history).
	Linearizability string `json:"linearizability"`
	// Operations: recorded by the clients; Checked: the steps porcupine checked (a range counts
	// once per key, failed writes and unanswered reads are not steps).
	Operations        int         `json:"operations"`
	Checked           int         `json:"checked"`
	Acknowledged      int         `json:"acknowledged_writes"`
	UnknownResolved   int         `json:"unknown_resolved"`
	UnknownUnresolved int         `json:"unknown_unresolved"`
	Dropped           int         `json:"dropped"`
	Watches           int         `json:"watches"`
	WatchEvents       int         `json:"watch_events"`
	LostWrites        []LostWrite `json:"lost_writes"`
	Violations        []Violation `json:"violations"`
	Notes             []string    `json:"notes"`
	Visualization     string      `json:"visualization,omitempty"`
	CheckMillis       int64       `json:"check_ms"`
}

func (r *Report) violation(kind, message string) {
	r.Violations = append(r.Violations, Violation{kind, message})
}

func (r *Report) note(message string) {
	r.Notes = append(r.Notes, message)
}

// summary: one line for the test's log.
func (r *Report) summary() string {
	return fmt.Sprintf("history %s: %s; linearizability %s over %d operations (%d steps, %d unknown outcomes resolved, %d unresolved); %d watch events from %d watches; %d acknowledged writes, %d lost; %d violations; checked in %d ms",
		r.Label, r.Result, r.Linearizability, r.Operations, r.Checked, r.UnknownResolved, r.UnknownUnresolved,
		r.WatchEvents, r.Watches, r.Acknowledged, len(r.LostWrites), len(r.Violations), r.CheckMillis)
}

func (r *Report) details() string {
	var b strings.Builder
	for i, v := range r.Violations {
		if i == 20 {
			fmt.Fprintf(&b, "  ... %d more in verdict.json\n", len(r.Violations)-20)
			break
		}
		fmt.Fprintf(&b, "  %s: %s\n", v.Kind, v.Message)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	return b.String()
}
