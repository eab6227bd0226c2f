package main

import (
	"fmt"
	"math"
	"sort"

	"github.com/anishathalye/porcupine"
)

// An operation whose outcome is unknown (a timeout, a lost connection) may have been applied
// at any time after its call, also after every other operation: porcupine gets it with an
// unbounded return.
const unboundedReturn int64 = math.MaxInt64

// Where a write is known to have landed: the revision and where that was seen.
type sighting struct {
	revision int64
	key      string
	isDelete bool
	where    string
}

// What the watches and the reads say was written, gathered before the model runs.
type evidence struct {
	// byValue: every put a watch delivered or a read returned, by its (unique) value.
	byValue map[string]sighting
	// deletes: per key, the revisions at which a watch delivered its deletion.
	deletes map[string]map[int64]string
	// complete: every write of the prefix up to the final revision is among the sightings
	// (the replay watch covered [start, final] without compaction), so a write not sighted
	// was not applied.
	complete bool
}

type resolution struct {
	operations []porcupine.Operation
	resolved   int // unknown outcomes the evidence settled (applied at a revision, or not)
	dropped    int // failed writes, unknown reads, writes shown not applied: nothing to check
	unresolved int // unknown writes the model must try both ways
}

// gatherEvidence collects every sighting of a write; contradictions between sightings (one
// value at two revisions) are violations.
func gatherEvidence(h *History, report *Report) *evidence {
	ev := &evidence{byValue: map[string]sighting{}, deletes: map[string]map[int64]string{}}
	note := func(value string, s sighting) {
		if prev, seen := ev.byValue[value]; seen {
			if prev.revision != s.revision || prev.key != s.key {
				report.violation(kindWatchMismatch, fmt.Sprintf(
					"value %s seen at %s rev %d (%s) and at %s rev %d (%s)",
					value, prev.key, prev.revision, prev.where, s.key, s.revision, s.where))
			}
			return
		}
		ev.byValue[value] = s
	}
	for _, w := range h.Watches {
		for _, e := range w.Events {
			where := fmt.Sprintf("watch %s at %.3f s", w.Name, seconds(e.At))
			if e.Type == "delete" {
				if ev.deletes[e.Key] == nil {
					ev.deletes[e.Key] = map[int64]string{}
				}
				ev.deletes[e.Key][e.Revision] = where
				continue
			}
			note(e.Value, sighting{e.Revision, e.Key, false, where})
		}
	}
	for i := range h.Operations {
		op := &h.Operations[i]
		if op.Status != StatusOK {
			continue
		}
		for _, kv := range op.Kvs {
			where := fmt.Sprintf("read by %s", h.describe(op))
			note(kv.Value, sighting{kv.ModRevision, kv.Key, false, where})
		}
	}
	for _, w := range h.Watches {
		if w.Replay && replayCovers(h, &w) {
			ev.complete = true
		}
	}
	return ev
}

// replayCovers: the replay watch delivered everything from the start to the last write to the
// workload's keys (it asks for no progress notification, so it cannot show it passed later
// revisions of other keys).
func replayCovers(h *History, w *Watch) bool {
	if w.StartRevision > h.StartRevision+1 {
		return false
	}
	for _, r := range w.Resumes {
		if r.CompactRevision > 0 {
			return false
		}
	}
	return reached(w) >= lastWrite(h)
}

// reached: the highest revision up to which a watch is known to have delivered everything.
func reached(w *Watch) int64 {
	top := w.StartRevision - 1
	for _, e := range w.Events {
		if e.Revision > top {
			top = e.Revision
		}
	}
	for _, p := range w.Progress {
		if p.Revision > top {
			top = p.Revision
		}
	}
	return top
}

// resolve turns the recorded operations into the model's per-key steps: a range becomes one
// read per key at its header revision; an unknown write sighted by a watch or a read becomes
// applied at that revision; a write never sighted when the evidence is complete was not applied
// and is left out; a write reported applied or failed is checked against the sightings.
func resolve(h *History, ev *evidence, report *Report) resolution {
	var res resolution
	add := func(op *Operation, index int, in stepInput, out stepOutput, bounded bool) {
		in.Source = index
		ret := op.Return
		if !bounded {
			ret = unboundedReturn
		}
		res.operations = append(res.operations, porcupine.Operation{
			ClientId: op.Client,
			Input:    in,
			Call:     op.Call,
			Output:   out,
			Return:   ret,
			Metadata: h.describe(op),
		})
	}
	readOutput := func(op *Operation, key string) stepOutput {
		out := stepOutput{Revision: op.Revision}
		for _, kv := range op.Kvs {
			if kv.Key == key {
				out.Found, out.Value, out.ModRev = true, kv.Value, kv.ModRevision
			}
		}
		return out
	}
	// Unknown deletes of each key, by call, matched below to delete events no answered
	// delete explains.
	unknownDeletes := map[string][]int{}
	answeredDeletes := map[string]map[int64]bool{}

	for i := range h.Operations {
		op := &h.Operations[i]
		switch op.Type {
		case OpGet, OpRange:
			if op.Status != StatusOK {
				res.dropped++
				continue
			}
			keys := []string{op.Key}
			if op.Type == OpRange {
				keys = h.Keys
				known := map[string]bool{}
				for _, k := range h.Keys {
					known[k] = true
				}
				for _, kv := range op.Kvs {
					if !known[kv.Key] {
						report.violation(kindNotLinearizable, fmt.Sprintf(
							"%s returned %s, a key never written", h.describe(op), kv.Key))
					}
				}
			}
			for _, k := range keys {
				add(op, i, stepInput{Kind: stepRead, Key: k}, readOutput(op, k), true)
			}
		case OpPut, OpTxn:
			seen, sighted := ev.byValue[op.Value]
			if sighted && seen.key != op.Key {
				report.violation(kindWatchMismatch, fmt.Sprintf(
					"%s: its value was seen under %s (%s)", h.describe(op), seen.key, seen.where))
			}
			applied := op.Status == StatusOK && (op.Type == OpPut || op.Succeeded)
			switch {
			case applied:
				if sighted && seen.revision != op.Revision {
					report.violation(kindWatchMismatch, fmt.Sprintf(
						"%s, but its value was seen at rev %d (%s)", h.describe(op), seen.revision, seen.where))
				}
				kind := stepPutApplied
				if op.Type == OpTxn {
					kind = stepTxnApplied
				}
				add(op, i, stepInput{Kind: kind, Key: op.Key, Value: op.Value, Expected: op.ExpectedModRevision},
					stepOutput{Revision: op.Revision}, true)
			case op.Status == StatusOK: // a txn whose compare failed
				if sighted {
					report.violation(kindWatchMismatch, fmt.Sprintf(
						"%s, but its value was written at rev %d (%s)", h.describe(op), seen.revision, seen.where))
				}
				out := readOutput(op, op.Key)
				add(op, i, stepInput{Kind: stepTxnFailed, Key: op.Key, Value: op.Value, Expected: op.ExpectedModRevision}, out, true)
			case op.Status == StatusFailed:
				if sighted {
					report.violation(kindFailedWriteApplied, fmt.Sprintf(
						"%s, but it was applied at rev %d (%s)", h.describe(op), seen.revision, seen.where))
				}
				res.dropped++
			case sighted: // unknown, and seen applied
				kind := stepPutApplied
				if op.Type == OpTxn {
					kind = stepTxnApplied
				}
				add(op, i, stepInput{Kind: kind, Key: op.Key, Value: op.Value, Expected: op.ExpectedModRevision},
					stepOutput{Revision: seen.revision}, false)
				res.resolved++
			case ev.complete: // unknown, never seen: not applied
				res.dropped++
				res.resolved++
			default:
				kind := stepPutUnresolved
				if op.Type == OpTxn {
					kind = stepTxnUnresolved
				}
				add(op, i, stepInput{Kind: kind, Key: op.Key, Value: op.Value, Expected: op.ExpectedModRevision},
					stepOutput{}, false)
				res.unresolved++
			}
		case OpDelete:
			switch {
			case op.Status == StatusOK && op.Deleted > 0:
				if answeredDeletes[op.Key] == nil {
					answeredDeletes[op.Key] = map[int64]bool{}
				}
				answeredDeletes[op.Key][op.Revision] = true
				add(op, i, stepInput{Kind: stepDelApplied, Key: op.Key}, stepOutput{Revision: op.Revision}, true)
			case op.Status == StatusOK:
				add(op, i, stepInput{Kind: stepDelNothing, Key: op.Key}, stepOutput{Revision: op.Revision}, true)
			case op.Status == StatusFailed:
				res.dropped++
			default:
				unknownDeletes[op.Key] = append(unknownDeletes[op.Key], i)
			}
		}
	}

	// Deletions a watch delivered that no answered delete explains: each was one of the key's
	// unknown deletes. The earliest such revision goes to the earliest call (any other
	// matching only constrains the operations more, as they are otherwise identical). The
	// history lists operations client by client, so the key's unknown deletes are put in call
	// order first: matching in the file's order gave an early revision to a later client's
	// delete called long after it, a false revision-order violation (seen in e2e_upgrades).
	keys := make([]string, 0, len(ev.deletes))
	for k := range ev.deletes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	matched := map[int]int64{}
	for _, key := range keys {
		var revisions []int64
		for r := range ev.deletes[key] {
			if !answeredDeletes[key][r] {
				revisions = append(revisions, r)
			}
		}
		sort.Slice(revisions, func(a, b int) bool { return revisions[a] < revisions[b] })
		pending := append([]int(nil), unknownDeletes[key]...)
		sort.SliceStable(pending, func(a, b int) bool {
			return h.Operations[pending[a]].Call < h.Operations[pending[b]].Call
		})
		for n, r := range revisions {
			if n >= len(pending) {
				report.violation(kindWatchUnknownWrite, fmt.Sprintf(
					"a deletion of %s at rev %d (%s) that no delete of the history explains",
					key, r, ev.deletes[key][r]))
				continue
			}
			matched[pending[n]] = r
		}
	}
	for _, key := range sortedKeys(unknownDeletes) {
		for _, i := range unknownDeletes[key] {
			op := &h.Operations[i]
			if r, ok := matched[i]; ok {
				add(op, i, stepInput{Kind: stepDelApplied, Key: op.Key}, stepOutput{Revision: r}, false)
				res.resolved++
			} else if ev.complete {
				// Not seen deleting anything: it deleted nothing or never ran; either way the
				// key is as it was.
				res.dropped++
				res.resolved++
			} else {
				add(op, i, stepInput{Kind: stepDelUnresolved, Key: op.Key}, stepOutput{}, false)
				res.unresolved++
			}
		}
	}
	return res
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
