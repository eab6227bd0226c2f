package main

import (
	"fmt"
	"hash/fnv"

	"github.com/anishathalye/porcupine"
)

// The sequential specification of one key of etcd, with revisions. etcd orders every write of
// the whole store by one revision counter; restricted to a key, a linearization of the whole
// history is a linearization of the key's operations in which
//   - the revisions the operations carry never decrease (a read at revision h follows every
//     write with a revision up to h and precedes every write after it), a write's revision
//     exceeds every revision before it;
//   - a read returns the key's last write, with that write's revision as its mod_revision;
//   - a txn's compare on the mod_revision (0: absent) decides its branch.
// So the model partitions by key (porcupine checks each key alone, fast) and still checks a
// read against the revision it claims.

// unknownRevision marks a write applied at a revision no one reported (a write whose outcome
// is unknown and was never observed): a later read of its value names it.
const unknownRevision int64 = -1

type keyState struct {
	Exists bool
	Value  string
	ModRev int64 // the last write's revision; 0 when absent, unknownRevision when unreported
	Rev    int64 // no operation linearized after this point carries a lower revision
}

// The kinds of a per-key step, after unknown outcomes were resolved (resolve.go).
const (
	stepPutApplied    = "put"            // applied at Revision
	stepPutUnresolved = "put?"           // may or may not have applied; revision unknown
	stepRead          = "read"           // returned Found/Value/ModRev at header Revision
	stepTxnApplied    = "txn"            // compare held, put applied at Revision
	stepTxnFailed     = "txn-failed"     // compare did not hold; read Found/Value/ModRev at Revision
	stepTxnUnresolved = "txn?"           // may or may not have applied
	stepDelApplied    = "delete"         // deleted the key at Revision
	stepDelNothing    = "delete-nothing" // found nothing to delete, at header Revision
	stepDelUnresolved = "delete?"        // may or may not have deleted it
)

type stepInput struct {
	Kind     string
	Key      string
	Value    string // written value (put, txn)
	Expected int64  // txn compare
	Source   int    // index into History.Operations (for messages)
}

type stepOutput struct {
	Revision int64
	Found    bool
	Value    string
	ModRev   int64
}

func keyModel() porcupine.Model {
	nondeterministic := porcupine.NondeterministicModel{
		Partition: partitionByKey,
		Init:      func() []interface{} { return []interface{}{keyState{}} },
		Step: func(state, input, output interface{}) []interface{} {
			return step(state.(keyState), input.(stepInput), output.(stepOutput))
		},
		Equal: func(a, b interface{}) bool { return a.(keyState) == b.(keyState) },
		Hash: func(state interface{}) uint64 {
			s := state.(keyState)
			h := fnv.New64a()
			fmt.Fprintf(h, "%t|%s|%d|%d", s.Exists, s.Value, s.ModRev, s.Rev)
			return h.Sum64()
		},
		DescribeOperation: func(input, output interface{}) string {
			return describeStep(input.(stepInput), output.(stepOutput))
		},
		DescribeState: func(state interface{}) string {
			s := state.(keyState)
			rev := fmt.Sprintf("rev ≥ %d", s.Rev)
			if !s.Exists {
				return "absent, " + rev
			}
			if s.ModRev == unknownRevision {
				return fmt.Sprintf("%s@?, %s", s.Value, rev)
			}
			return fmt.Sprintf("%s@%d, %s", s.Value, s.ModRev, rev)
		},
		DescribeOperationMetadata: func(info interface{}) string {
			if info == nil {
				return ""
			}
			return fmt.Sprint(info)
		},
	}
	return nondeterministic.ToModel()
}

func partitionByKey(history []porcupine.Operation) [][]porcupine.Operation {
	index := map[string]int{}
	var partitions [][]porcupine.Operation
	for _, op := range history {
		key := op.Input.(stepInput).Key
		i, ok := index[key]
		if !ok {
			i = len(partitions)
			index[key] = i
			partitions = append(partitions, nil)
		}
		partitions[i] = append(partitions[i], op)
	}
	return partitions
}

// readMatches: a read of s returning (found, value, modRev) at header revision h.
func readMatches(s keyState, out stepOutput) (keyState, bool) {
	if out.Revision < s.Rev {
		return s, false
	}
	if !out.Found {
		if s.Exists {
			return s, false
		}
		s.Rev = out.Revision
		return s, true
	}
	if !s.Exists || s.Value != out.Value || out.ModRev > out.Revision {
		return s, false
	}
	switch {
	case s.ModRev == out.ModRev:
	case s.ModRev == unknownRevision && out.ModRev > s.Rev:
		s.ModRev = out.ModRev
	default:
		return s, false
	}
	s.Rev = out.Revision
	return s, true
}

// compareHolds: whether a txn's compare (mod_revision == expected) may hold on s: true, false,
// or both when the last write's revision is unknown.
func compareHolds(s keyState, expected int64) (mayHold, mayFail bool) {
	if s.ModRev == unknownRevision {
		return expected > s.Rev, true
	}
	return s.ModRev == expected, s.ModRev != expected
}

func step(s keyState, in stepInput, out stepOutput) []interface{} {
	var next []interface{}
	switch in.Kind {
	case stepPutApplied:
		if out.Revision > s.Rev {
			next = append(next, keyState{true, in.Value, out.Revision, out.Revision})
		}
	case stepPutUnresolved:
		next = append(next, s, keyState{true, in.Value, unknownRevision, s.Rev})
	case stepRead:
		if n, ok := readMatches(s, out); ok {
			next = append(next, n)
		}
	case stepTxnApplied:
		if hold, _ := compareHolds(s, in.Expected); hold && out.Revision > s.Rev {
			next = append(next, keyState{true, in.Value, out.Revision, out.Revision})
		}
	case stepTxnFailed:
		if _, fail := compareHolds(s, in.Expected); fail {
			if n, ok := readMatches(s, out); ok {
				next = append(next, n)
			}
		}
	case stepTxnUnresolved:
		next = append(next, s)
		if hold, _ := compareHolds(s, in.Expected); hold {
			next = append(next, keyState{true, in.Value, unknownRevision, s.Rev})
		}
	case stepDelApplied:
		if s.Exists && out.Revision > s.Rev {
			next = append(next, keyState{false, "", 0, out.Revision})
		}
	case stepDelNothing:
		if !s.Exists && out.Revision >= s.Rev {
			s.Rev = out.Revision
			next = append(next, s)
		}
	case stepDelUnresolved:
		next = append(next, s)
		if s.Exists {
			next = append(next, keyState{false, "", 0, s.Rev})
		}
	}
	return next
}

func describeStep(in stepInput, out stepOutput) string {
	read := func() string {
		if !out.Found {
			return fmt.Sprintf("absent (rev %d)", out.Revision)
		}
		return fmt.Sprintf("%s@%d (rev %d)", out.Value, out.ModRev, out.Revision)
	}
	switch in.Kind {
	case stepPutApplied:
		return fmt.Sprintf("put %s=%s → rev %d", in.Key, in.Value, out.Revision)
	case stepPutUnresolved:
		return fmt.Sprintf("put %s=%s → unknown", in.Key, in.Value)
	case stepRead:
		return fmt.Sprintf("get %s → %s", in.Key, read())
	case stepTxnApplied:
		return fmt.Sprintf("txn if mod(%s)=%d put %s → ok rev %d", in.Key, in.Expected, in.Value, out.Revision)
	case stepTxnFailed:
		return fmt.Sprintf("txn if mod(%s)=%d put %s → compare failed, %s", in.Key, in.Expected, in.Value, read())
	case stepTxnUnresolved:
		return fmt.Sprintf("txn if mod(%s)=%d put %s → unknown", in.Key, in.Expected, in.Value)
	case stepDelApplied:
		return fmt.Sprintf("delete %s → rev %d", in.Key, out.Revision)
	case stepDelNothing:
		return fmt.Sprintf("delete %s → nothing (rev %d)", in.Key, out.Revision)
	case stepDelUnresolved:
		return fmt.Sprintf("delete %s → unknown", in.Key)
	}
	return in.Kind
}
