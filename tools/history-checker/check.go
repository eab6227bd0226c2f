package main

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

type options struct {
	timeout   time.Duration // for the linearizability check (each key shares it)
	visualize string        // failure, always or never
	outDir    string
}

// check runs every check on h and writes the visualization as options say.
func check(h *History, opts options) *Report {
	started := time.Now()
	report := &Report{Label: h.Label, Operations: len(h.Operations), Watches: len(h.Watches),
		LostWrites: []LostWrite{}, Violations: []Violation{}, Notes: []string{}}
	for _, w := range h.Watches {
		report.WatchEvents += len(w.Events)
	}
	report.Acknowledged = len(acknowledged(h))

	ev := gatherEvidence(h, report)
	checkEventsMatchWrites(h, report)
	lost := lostWrites(h, report)
	report.LostWrites = append(report.LostWrites, lost...)
	lossy := h.AllowLoss && len(lost) > 0
	if !h.AllowLoss {
		for _, w := range lost {
			what := fmt.Sprintf("put %s=%s", w.Key, w.Value)
			if w.Delete {
				what = "delete " + w.Key
			}
			report.violation(kindLostWrite, fmt.Sprintf(
				"acknowledged %s at rev %d is missing from the cluster's final history", what, w.Revision))
		}
	}
	res := resolve(h, ev, report)
	report.Checked = len(res.operations)
	report.UnknownResolved = res.resolved
	report.UnknownUnresolved = res.unresolved
	report.Dropped = res.dropped
	checkWatches(h, lossy, bookmarkUnreliable(h.EtcdVersion), report)

	model := keyModel()
	illegal := false
	timedOut := false
	if lossy {
		report.Linearizability = "skipped"
		report.note(fmt.Sprintf("%d acknowledged writes were lost, which this scenario allows: the history before and after the loss is not one linearizable history, so linearizability, revision order and watch gaps were not checked", len(lost)))
	} else {
		checkRevisionOrder(h, &res, report)
		deadline := started.Add(opts.timeout)
		for _, part := range partitionByKey(res.operations) {
			remaining := time.Until(deadline)
			if remaining <= 0 {
				timedOut = true
				break
			}
			switch porcupine.CheckOperationsTimeout(model, part, remaining) {
			case porcupine.Illegal:
				illegal = true
				report.violation(kindNotLinearizable, describeIllegal(h, model, part, opts.timeout))
			case porcupine.Unknown:
				timedOut = true
			}
		}
		switch {
		case illegal:
			report.Linearizability = "illegal"
		case timedOut:
			report.Linearizability = "unknown"
			report.note(fmt.Sprintf("the linearizability check did not finish within %s", opts.timeout))
		default:
			report.Linearizability = "ok"
		}
	}

	switch {
	case len(report.Violations) > 0:
		report.Result = resultViolation
	case timedOut:
		report.Result = resultUnknown
	default:
		report.Result = resultOK
	}
	if opts.visualize == "always" || (opts.visualize == "failure" && report.Result != resultOK) {
		path := filepath.Join(opts.outDir, "visualization.html")
		if err := visualize(h, model, res.operations, lost, opts.timeout, path); err != nil {
			report.note("the visualization could not be written: " + err.Error())
		} else {
			report.Visualization = path
		}
	}
	report.CheckMillis = time.Since(started).Milliseconds()
	return report
}

// describeIllegal names the key, how far a linearization got, and the first operation (by
// call) that no linearization could place.
func describeIllegal(h *History, model porcupine.Model, part []porcupine.Operation, timeout time.Duration) string {
	key := part[0].Input.(stepInput).Key
	_, info := porcupine.CheckOperationsVerbose(model, part, timeout)
	longest := []porcupine.Operation{}
	for _, partition := range info.PartialLinearizationsOperations() {
		for _, candidate := range partition {
			if len(candidate) > len(longest) {
				longest = candidate
			}
		}
	}
	placed := map[int]bool{}
	for _, op := range longest {
		placed[op.Input.(stepInput).Source] = true
	}
	var first *porcupine.Operation
	for i := range part {
		op := &part[i]
		if placed[op.Input.(stepInput).Source] { // one key: a source is one step
			continue
		}
		if first == nil || op.Call < first.Call {
			first = op
		}
	}
	message := fmt.Sprintf("key %s: no linearization of its %d operations; the longest linearizable prefix places %d", key, len(part), len(longest))
	if len(longest) > 0 {
		last := longest[len(longest)-1]
		message += fmt.Sprintf(", ending with %s", model.DescribeOperation(last.Input, last.Output))
	}
	if first != nil {
		message += fmt.Sprintf("; the first it cannot place: %s", h.describe(&h.Operations[first.Input.(stepInput).Source]))
		if in := first.Input.(stepInput); in.Kind == stepRead {
			message += fmt.Sprintf(" (as read of %s: %s)", in.Key, model.DescribeOperation(first.Input, first.Output))
		}
	}
	return message
}

// visualize writes porcupine's HTML page of the history: every key's operations and the
// linearization found (or the longest partial ones), with the watches' resumes and the lost
// writes as annotations.
func visualize(h *History, model porcupine.Model, ops []porcupine.Operation, lost []LostWrite, timeout time.Duration, path string) error {
	_, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	var annotations []porcupine.Annotation
	for _, w := range h.Watches {
		for _, r := range w.Resumes {
			text := fmt.Sprintf("resumed from rev %d", r.StartRevision)
			if r.CompactRevision > 0 {
				text += fmt.Sprintf(", compacted: from rev %d", r.CompactRevision)
			}
			annotations = append(annotations, porcupine.Annotation{
				Tag: "watch " + w.Name, Start: r.At, Description: text, Details: r.Reason,
			})
		}
	}
	lostAt := map[string]bool{}
	for _, w := range lost {
		lostAt[strconv.FormatInt(w.Revision, 10)+"/"+w.Key] = true
	}
	for i := range h.Operations {
		op := &h.Operations[i]
		if op.Status == StatusOK && lostAt[strconv.FormatInt(op.Revision, 10)+"/"+op.Key] && op.Type != OpGet && op.Type != OpRange {
			annotations = append(annotations, porcupine.Annotation{
				Tag: "lost writes", Start: op.Call, End: op.Return,
				Description: "lost: " + describeOperation(op), BackgroundColor: "#f8b4b4",
			})
		}
	}
	sort.SliceStable(annotations, func(a, b int) bool { return annotations[a].Start < annotations[b].Start })
	info.AddAnnotations(annotations)
	return porcupine.VisualizePath(model, info, path)
}

// bookmarkUnreliable: etcd releases before the fix of etcd-io/etcd#15220 (3.4.25, 3.5.8) may
// answer a progress request with a revision whose events are still on their way.
func bookmarkUnreliable(version string) bool {
	parts := strings.Split(strings.TrimPrefix(version, "v"), ".")
	if len(parts) < 3 {
		return false
	}
	major, _ := strconv.Atoi(parts[0])
	minor, _ := strconv.Atoi(parts[1])
	patch, _ := strconv.Atoi(strings.SplitN(parts[2], "-", 2)[0])
	if major != 3 {
		return false
	}
	switch minor {
	case 0, 1, 2, 3:
		return true
	case 4:
		return patch < 25
	case 5:
		return patch < 8
	}
	return false
}
