package main

import (
	"fmt"
	"sort"
)

// A write the history knows landed at a revision (answered, or sighted by a watch).
type knownWrite struct {
	revision int64
	key      string
	isDelete bool
	value    string
}

// acknowledged: the writes etcd answered as applied, with their revisions.
func acknowledged(h *History) []knownWrite {
	var writes []knownWrite
	for i := range h.Operations {
		op := &h.Operations[i]
		if op.Status != StatusOK {
			continue
		}
		switch {
		case op.Type == OpPut, op.Type == OpTxn && op.Succeeded:
			writes = append(writes, knownWrite{op.Revision, op.Key, false, op.Value})
		case op.Type == OpDelete && op.Deleted > 0:
			writes = append(writes, knownWrite{op.Revision, op.Key, true, ""})
		}
	}
	return writes
}

// LostWrite: an acknowledged write missing from the cluster's final history.
type LostWrite struct {
	Key      string `json:"key"`
	Value    string `json:"value,omitempty"`
	Delete   bool   `json:"delete,omitempty"`
	Revision int64  `json:"revision"`
}

// lostWrites: the acknowledged writes the cluster no longer has. Judged against the replay
// watch (the final history from the start) when it covers it; otherwise against the final
// read, which can only see a write that was not overwritten since.
func lostWrites(h *History, report *Report) []LostWrite {
	var replay *Watch
	for i := range h.Watches {
		if h.Watches[i].Replay && replayCovers(h, &h.Watches[i]) {
			replay = &h.Watches[i]
		}
	}
	var lost []LostWrite
	acked := acknowledged(h)
	if replay != nil {
		final := map[knownWrite]bool{}
		for _, e := range replay.Events {
			w := knownWrite{e.Revision, e.Key, e.Type == "delete", e.Value}
			final[w] = true
		}
		for _, w := range acked {
			if !final[w] {
				lost = append(lost, LostWrite{w.key, w.value, w.isDelete, w.revision})
			}
		}
		return lost
	}
	report.note("lost writes judged from the final read: no replay watch covered the history (compacted or incomplete)")
	var finalRead *Operation
	for i := range h.Operations {
		op := &h.Operations[i]
		if op.Type == OpRange && op.Status == StatusOK && op.Call >= finalCall(h) {
			finalRead = op
		}
	}
	if finalRead == nil {
		report.note("no final read either: lost writes not judged")
		return nil
	}
	state := map[string]KeyValue{}
	for _, kv := range finalRead.Kvs {
		state[kv.Key] = kv
	}
	for _, w := range acked {
		kv, exists := state[w.key]
		switch {
		case w.revision > finalRead.Revision:
			lost = append(lost, LostWrite{w.key, w.value, w.isDelete, w.revision})
		case !w.isDelete && exists && kv.ModRevision == w.revision && kv.Value != w.value:
			lost = append(lost, LostWrite{w.key, w.value, w.isDelete, w.revision})
		case !w.isDelete && exists && kv.ModRevision < w.revision:
			lost = append(lost, LostWrite{w.key, w.value, w.isDelete, w.revision})
		}
	}
	return lost
}

// finalCall: the call of the final read (the last operation called).
func finalCall(h *History) int64 {
	var last int64
	for i := range h.Operations {
		if h.Operations[i].Call > last {
			last = h.Operations[i].Call
		}
	}
	return last
}

// checkRevisionOrder: across keys, etcd's revision never goes back in real time. An operation
// called after another returned carries a revision at least as high, and a write a higher one.
// Porcupine checks each key alone; this is what ties the keys together. Also, no revision is
// used by two different writes.
func checkRevisionOrder(h *History, res *resolution, report *Report) {
	type timed struct {
		call, ret int64
		revision  int64
		write     bool
		source    int
	}
	var ops []timed
	for _, op := range res.operations {
		in, out := op.Input.(stepInput), op.Output.(stepOutput)
		switch in.Kind {
		case stepPutUnresolved, stepTxnUnresolved, stepDelUnresolved:
			continue
		}
		write := in.Kind == stepPutApplied || in.Kind == stepTxnApplied || in.Kind == stepDelApplied
		ops = append(ops, timed{op.Call, op.Return, out.Revision, write, in.Source})
	}
	byReturn := append([]timed(nil), ops...)
	sort.Slice(byReturn, func(a, b int) bool { return byReturn[a].ret < byReturn[b].ret })
	byCall := append([]timed(nil), ops...)
	sort.Slice(byCall, func(a, b int) bool { return byCall[a].call < byCall[b].call })
	next, highest, highestAt := 0, int64(0), -1
	reported := map[int]bool{}
	for _, b := range byCall {
		for next < len(byReturn) && byReturn[next].ret < b.call {
			if byReturn[next].revision > highest {
				highest, highestAt = byReturn[next].revision, byReturn[next].source
			}
			next++
		}
		if highestAt < 0 || reported[b.source] {
			continue
		}
		if b.revision < highest || (b.write && b.revision == highest) {
			reported[b.source] = true
			report.violation(kindRevisionOrder, fmt.Sprintf(
				"%s carries rev %d, after %s had returned rev %d",
				h.describe(&h.Operations[b.source]), b.revision,
				h.describe(&h.Operations[highestAt]), highest))
		}
	}

	// One revision, one write (each of the workload's writes touches one key).
	byRevision := map[int64]knownWrite{}
	for _, op := range res.operations {
		in, out := op.Input.(stepInput), op.Output.(stepOutput)
		var w knownWrite
		switch in.Kind {
		case stepPutApplied, stepTxnApplied:
			w = knownWrite{out.Revision, in.Key, false, in.Value}
		case stepDelApplied:
			w = knownWrite{out.Revision, in.Key, true, ""}
		default:
			continue
		}
		if prev, seen := byRevision[w.revision]; seen && prev != w {
			report.violation(kindRevisionReused, fmt.Sprintf(
				"rev %d is claimed by two writes: %s and %s", w.revision, describeWrite(prev), describeWrite(w)))
			continue
		}
		byRevision[w.revision] = w
	}
}

func describeWrite(w knownWrite) string {
	if w.isDelete {
		return fmt.Sprintf("delete %s", w.key)
	}
	return fmt.Sprintf("put %s=%s", w.key, w.value)
}

// checkWatches: each watch delivers events in revision order without duplicates; after a
// resume, from where it left off; nothing that another watch or an answered write shows
// within the revisions it covered is missing (unless etcd said they were compacted); progress
// notifications never go back within one stream and no event arrives at or below one; every
// watch reached the last write to the workload's keys.
func checkWatches(h *History, lossy, bookmarkUnreliable bool, report *Report) {
	// Every write revision of the prefix anyone knows of.
	known := map[int64]knownWrite{}
	for _, w := range acknowledged(h) {
		known[w.revision] = w
	}
	for _, w := range h.Watches {
		for _, e := range w.Events {
			known[e.Revision] = knownWrite{e.Revision, e.Key, e.Type == "delete", e.Value}
		}
	}
	revisions := make([]int64, 0, len(known))
	for r := range known {
		revisions = append(revisions, r)
	}
	sort.Slice(revisions, func(a, b int) bool { return revisions[a] < revisions[b] })

	for i := range h.Watches {
		w := &h.Watches[i]
		// Order and duplicates.
		var last int64
		delivered := map[int64]bool{}
		for _, e := range w.Events {
			switch {
			case e.Revision == last:
				report.violation(kindWatchDuplicate, fmt.Sprintf(
					"watch %s delivered rev %d twice (again at %.3f s)", w.Name, e.Revision, seconds(e.At)))
			case e.Revision < last:
				report.violation(kindWatchOrder, fmt.Sprintf(
					"watch %s delivered rev %d at %.3f s after rev %d", w.Name, e.Revision, seconds(e.At), last))
			}
			if e.Revision > last {
				last = e.Revision
			}
			delivered[e.Revision] = true
		}
		// Progress notifications: never back within one stream, and no event at or below one
		// after it. A resumed watch may be on another member, which reports its own applied
		// revision: one that has not applied as far as the member before (a follower when a
		// leader that had just committed is cut off) tells the truth about itself, so a lower
		// notification after a resume is noted, not a violation. Events stay bound to every
		// notification before them, whichever stream it came on: a notification says the
		// watch has seen every event up to it.
		merged := mergeWatchTimeline(w)
		var progress, streamProgress int64
		stream := 0
		for _, item := range merged {
			if s := streamAt(w, item.at); s != stream {
				stream, streamProgress = s, 0
			}
			if item.progress {
				switch {
				case item.revision < streamProgress:
					report.violation(kindWatchProgress, fmt.Sprintf(
						"watch %s: progress notification at rev %d (%.3f s) after one at rev %d",
						w.Name, item.revision, seconds(item.at), streamProgress))
				case item.revision < progress && streamProgress == 0:
					report.note(fmt.Sprintf(
						"watch %s: resumed, its first progress notification is at rev %d (%.3f s), behind rev %d before: the member it resumed on had applied less",
						w.Name, item.revision, seconds(item.at), progress))
				}
				streamProgress = max(streamProgress, item.revision)
				progress = max(progress, item.revision)
			} else if item.revision <= progress {
				message := fmt.Sprintf("watch %s: event at rev %d (%.3f s) after a progress notification at rev %d",
					w.Name, item.revision, seconds(item.at), progress)
				if bookmarkUnreliable {
					report.note(message + fmt.Sprintf(": etcd %s answers progress requests ahead of its events (etcd-io/etcd#15220, fixed in 3.4.25 and 3.5.8)", h.EtcdVersion))
				} else {
					report.violation(kindWatchProgress, message)
				}
			}
		}
		// Resumes start right after what was delivered, or where etcd said it compacted.
		var excused [][2]int64 // [from, to) revisions etcd compacted away under this watch
		for _, r := range w.Resumes {
			seenBefore := w.StartRevision - 1
			for _, e := range w.Events {
				if e.At <= r.At && e.Revision > seenBefore {
					seenBefore = e.Revision
				}
			}
			for _, p := range w.Progress {
				if p.At <= r.At && p.Revision > seenBefore {
					seenBefore = p.Revision
				}
			}
			if r.StartRevision > seenBefore+1 {
				report.violation(kindWatchGap, fmt.Sprintf(
					"watch %s resumed at rev %d (%.3f s) though it had delivered only up to rev %d",
					w.Name, r.StartRevision, seconds(r.At), seenBefore))
			}
			if r.CompactRevision > r.StartRevision {
				excused = append(excused, [2]int64{r.StartRevision, r.CompactRevision})
				report.note(fmt.Sprintf("watch %s: revisions %d to %d were compacted before it resumed (%.3f s)",
					w.Name, r.StartRevision, r.CompactRevision-1, seconds(r.At)))
			}
		}
		top := reached(w)
		if need := lastWrite(h); top < need {
			report.violation(kindWatchIncomplete, fmt.Sprintf(
				"watch %s stopped at rev %d, short of rev %d, the last write to the workload's keys", w.Name, top, need))
		}
		if lossy {
			continue // after a loss, revisions are reused: the watches' views are not comparable
		}
		// Gaps: a known write within [start, top] that this watch did not deliver.
		var missing []int64
		for _, r := range revisions {
			if r < w.StartRevision || r > top || delivered[r] {
				continue
			}
			compacted := false
			for _, x := range excused {
				// Compaction at rev C keeps each key's latest version at or below C, unless that
				// version is a deletion: a tombstone at C itself goes too, so a watch resumed at
				// C cannot deliver it.
				if (r >= x[0] && r < x[1]) || (r == x[1] && known[r].isDelete) {
					compacted = true
				}
			}
			if !compacted {
				missing = append(missing, r)
			}
		}
		if len(missing) > 0 {
			shown := missing
			if len(shown) > 5 {
				shown = shown[:5]
			}
			var what []string
			for _, r := range shown {
				what = append(what, fmt.Sprintf("rev %d (%s)", r, describeWrite(known[r])))
			}
			report.violation(kindWatchGap, fmt.Sprintf(
				"watch %s covered revs %d to %d but missed %d write(s): %v", w.Name, w.StartRevision, top, len(missing), what))
		}
	}
}

// streamAt: which of a watch's streams (0 before its first resume, 1 after it...) was open
// at `at`. A resume is recorded before its stream opens, so everything that stream delivers
// comes after it.
func streamAt(w *Watch, at int64) int {
	n := 0
	for _, r := range w.Resumes {
		if r.At <= at {
			n++
		}
	}
	return n
}

type timelineItem struct {
	at       int64
	revision int64
	progress bool
}

// mergeWatchTimeline: a watch's events and progress notifications in the order it received
// them (by time; an event before a notification at the same instant).
func mergeWatchTimeline(w *Watch) []timelineItem {
	items := make([]timelineItem, 0, len(w.Events)+len(w.Progress))
	for _, e := range w.Events {
		items = append(items, timelineItem{e.At, e.Revision, false})
	}
	for _, p := range w.Progress {
		items = append(items, timelineItem{p.At, p.Revision, true})
	}
	sort.SliceStable(items, func(a, b int) bool {
		if items[a].at != items[b].at {
			return items[a].at < items[b].at
		}
		return !items[a].progress && items[b].progress
	})
	return items
}

// checkEventsMatchWrites: every put event carries a value some write of the history wrote
// (resolve.go checks the revision against an answered write); every delete event is on one of
// the workload's keys.
func checkEventsMatchWrites(h *History, report *Report) {
	written := map[string]string{}
	for i := range h.Operations {
		op := &h.Operations[i]
		if op.Type == OpPut || op.Type == OpTxn {
			written[op.Value] = op.Key
		}
	}
	keys := map[string]bool{}
	for _, k := range h.Keys {
		keys[k] = true
	}
	for _, w := range h.Watches {
		for _, e := range w.Events {
			if e.Type == "delete" {
				if !keys[e.Key] {
					report.violation(kindWatchUnknownWrite, fmt.Sprintf(
						"watch %s: deletion of %s at rev %d, a key never written", w.Name, e.Key, e.Revision))
				}
				continue
			}
			key, ok := written[e.Value]
			switch {
			case !ok:
				report.violation(kindWatchUnknownWrite, fmt.Sprintf(
					"watch %s: %s=%s at rev %d (%.3f s), a value no client wrote", w.Name, e.Key, e.Value, e.Revision, seconds(e.At)))
			case key != e.Key:
				report.violation(kindWatchMismatch, fmt.Sprintf(
					"watch %s: %s=%s at rev %d, but that value was written to %s", w.Name, e.Key, e.Value, e.Revision, key))
			}
		}
	}
}

// lastWrite: the revision of the last write to the workload's keys anyone knows of (an
// acknowledged write or a watch's event) up to the final revision. A watch of the workload's
// prefix is bound to deliver up to it; revisions after it belong to other keys (the test's own
// writes, for example), which only a progress notification could show it passed.
func lastWrite(h *History) int64 {
	top := h.StartRevision
	for _, w := range acknowledged(h) {
		if w.revision > top && w.revision <= h.FinalRevision {
			top = w.revision
		}
	}
	for _, w := range h.Watches {
		for _, e := range w.Events {
			if e.Revision > top && e.Revision <= h.FinalRevision {
				top = e.Revision
			}
		}
	}
	return top
}
