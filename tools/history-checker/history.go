package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// The history a client workload recorded (crates/e2e-support/src/workload.rs writes it).
// Times are nanoseconds of one monotonic clock, from the workload's start.
type History struct {
	Version int    `json:"version"`
	Label   string `json:"label"`
	// Prefix holds every key of the workload; Keys lists them (a range covers them all).
	Prefix string   `json:"prefix"`
	Keys   []string `json:"keys"`
	// StartRevision: the store's revision before the first operation; watches start after it.
	StartRevision int64 `json:"start_revision"`
	// FinalRevision: the header revision of the final read, after every client stopped.
	FinalRevision int64 `json:"final_revision"`
	// AllowLoss: the scenario may lose acknowledged writes (lost-quorum recovery, a restore):
	// they are reported, not counted as violations, and the checks that a loss invalidates
	// are skipped when one happened.
	AllowLoss bool `json:"allow_loss"`
	// EtcdVersion: the server version the workload met first ("3.5.1"), if it asked.
	EtcdVersion string      `json:"etcd_version,omitempty"`
	Clients     []Client    `json:"clients"`
	Operations  []Operation `json:"operations"`
	Watches     []Watch     `json:"watches"`
}

type Client struct {
	ID       int    `json:"id"`
	Name     string `json:"name"`
	Endpoint string `json:"endpoint"`
}

type KeyValue struct {
	Key         string `json:"key"`
	Value       string `json:"value"`
	ModRevision int64  `json:"mod_revision"`
}

// Operation types and outcomes.
const (
	OpPut    = "put"
	OpGet    = "get"
	OpRange  = "range"
	OpTxn    = "txn"
	OpDelete = "delete"

	StatusOK      = "ok"      // answered: the response is recorded
	StatusFailed  = "failed"  // a definite error: etcd did not apply it
	StatusUnknown = "unknown" // timed out or the connection was lost: it may or may not apply
)

type Operation struct {
	Client int    `json:"client"`
	Call   int64  `json:"call"`
	Return int64  `json:"return"`
	Type   string `json:"type"`
	Key    string `json:"key"`
	// Value written by a put or by a txn's success branch; unique in the history.
	Value string `json:"value,omitempty"`
	// ExpectedModRevision: a txn's compare (mod_revision(key) == expected; 0: absent).
	ExpectedModRevision int64  `json:"expected_mod_revision,omitempty"`
	Status              string `json:"status"`
	Error               string `json:"error,omitempty"`
	// Revision: the response header's revision (a write's own revision).
	Revision int64 `json:"revision,omitempty"`
	// Kvs: what a get or range returned, or a failed txn's read of the key.
	Kvs       []KeyValue `json:"kvs,omitempty"`
	Succeeded bool       `json:"succeeded,omitempty"`
	Deleted   int64      `json:"deleted,omitempty"`
}

// A watch on the workload's prefix, across every reconnection (resume).
type Watch struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
	// Replay: opened after the workload stopped, from StartRevision+1: the cluster's final
	// history of the prefix, against which acknowledged writes are judged lost or kept.
	Replay        bool         `json:"replay,omitempty"`
	StartRevision int64        `json:"start_revision"`
	Events        []WatchEvent `json:"events"`
	Progress      []Progress   `json:"progress"`
	Resumes       []Resume     `json:"resumes"`
}

type WatchEvent struct {
	At       int64  `json:"at"`
	Revision int64  `json:"revision"`
	Type     string `json:"type"` // put or delete
	Key      string `json:"key"`
	Value    string `json:"value,omitempty"`
}

// A progress notification: every event up to Revision has been delivered.
type Progress struct {
	At       int64 `json:"at"`
	Revision int64 `json:"revision"`
}

// A reconnection: the watch was opened again from StartRevision. When etcd answered that
// the revisions from there were compacted, CompactRevision is where it resumed instead.
type Resume struct {
	At              int64  `json:"at"`
	StartRevision   int64  `json:"start_revision"`
	CompactRevision int64  `json:"compact_revision,omitempty"`
	Reason          string `json:"reason,omitempty"`
}

func loadHistory(path string) (*History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readHistory(f)
}

func readHistory(r io.Reader) (*History, error) {
	decoder := json.NewDecoder(r)
	decoder.DisallowUnknownFields()
	var h History
	if err := decoder.Decode(&h); err != nil {
		return nil, fmt.Errorf("not a history: %w", err)
	}
	if err := h.validate(); err != nil {
		return nil, err
	}
	return &h, nil
}

// validate refuses a history the checks could misread, naming the first bad element.
func (h *History) validate() error {
	if h.Version != 1 {
		return fmt.Errorf("history version %d: this checker reads version 1", h.Version)
	}
	if len(h.Keys) == 0 {
		return fmt.Errorf("the history lists no keys")
	}
	keys := map[string]bool{}
	for _, k := range h.Keys {
		if !strings.HasPrefix(k, h.Prefix) {
			return fmt.Errorf("key %q is not under the prefix %q", k, h.Prefix)
		}
		keys[k] = true
	}
	clients := map[int]bool{}
	for i, c := range h.Clients {
		if c.ID != i {
			return fmt.Errorf("client %d has id %d: ids are the clients' positions", i, c.ID)
		}
		clients[c.ID] = true
	}
	values := map[string]int{}
	for i, op := range h.Operations {
		where := fmt.Sprintf("operation %d (%s %s)", i, op.Type, op.Key)
		if !clients[op.Client] {
			return fmt.Errorf("%s: unknown client %d", where, op.Client)
		}
		if op.Return < op.Call {
			return fmt.Errorf("%s: returns (%d) before its call (%d)", where, op.Return, op.Call)
		}
		switch op.Status {
		case StatusOK, StatusFailed, StatusUnknown:
		default:
			return fmt.Errorf("%s: status %q (ok, failed or unknown)", where, op.Status)
		}
		switch op.Type {
		case OpPut, OpTxn:
			if op.Value == "" {
				return fmt.Errorf("%s: a write without a value", where)
			}
			if j, seen := values[op.Value]; seen {
				return fmt.Errorf("%s: value %q is written twice (also by operation %d); every written value must be unique", where, op.Value, j)
			}
			values[op.Value] = i
			fallthrough
		case OpGet, OpDelete:
			if !keys[op.Key] {
				return fmt.Errorf("%s: key %q is not one of the history's keys", where, op.Key)
			}
		case OpRange:
			if op.Key != h.Prefix {
				return fmt.Errorf("%s: a range covers the prefix %q", where, h.Prefix)
			}
		default:
			return fmt.Errorf("%s: unknown type %q", where, op.Type)
		}
		if op.Status == StatusOK && op.Revision <= 0 {
			return fmt.Errorf("%s: answered without a header revision", where)
		}
	}
	for i, w := range h.Watches {
		if w.ID != i {
			return fmt.Errorf("watch %d has id %d: ids are the watches' positions", i, w.ID)
		}
		for j, e := range w.Events {
			if e.Type != "put" && e.Type != "delete" {
				return fmt.Errorf("watch %s event %d: type %q (put or delete)", w.Name, j, e.Type)
			}
			if e.Revision <= 0 {
				return fmt.Errorf("watch %s event %d: no revision", w.Name, j)
			}
		}
	}
	return nil
}

// describe one operation for messages.
func (h *History) describe(op *Operation) string {
	client := fmt.Sprintf("client %d", op.Client)
	if op.Client < len(h.Clients) && h.Clients[op.Client].Name != "" {
		client = h.Clients[op.Client].Name
	}
	at := fmt.Sprintf("[%.3f s, %.3f s]", seconds(op.Call), seconds(op.Return))
	if op.Status == StatusUnknown {
		at = fmt.Sprintf("[%.3f s, ?)", seconds(op.Call))
	}
	return fmt.Sprintf("%s %s %s", client, at, describeOperation(op))
}

func describeOperation(op *Operation) string {
	var what string
	switch op.Type {
	case OpPut:
		what = fmt.Sprintf("put %s=%s", op.Key, op.Value)
	case OpGet:
		what = fmt.Sprintf("get %s", op.Key)
	case OpRange:
		what = fmt.Sprintf("range %s*", op.Key)
	case OpTxn:
		what = fmt.Sprintf("txn if mod(%s)=%d put %s", op.Key, op.ExpectedModRevision, op.Value)
	case OpDelete:
		what = fmt.Sprintf("delete %s", op.Key)
	}
	switch op.Status {
	case StatusFailed:
		return what + " → failed: " + op.Error
	case StatusUnknown:
		return what + " → unknown: " + op.Error
	}
	switch op.Type {
	case OpPut:
		return fmt.Sprintf("%s → rev %d", what, op.Revision)
	case OpTxn:
		if op.Succeeded {
			return fmt.Sprintf("%s → ok rev %d", what, op.Revision)
		}
		return fmt.Sprintf("%s → compare failed, read %s (rev %d)", what, describeKvs(op.Kvs), op.Revision)
	case OpDelete:
		return fmt.Sprintf("%s → deleted %d (rev %d)", what, op.Deleted, op.Revision)
	default:
		return fmt.Sprintf("%s → %s (rev %d)", what, describeKvs(op.Kvs), op.Revision)
	}
}

func describeKvs(kvs []KeyValue) string {
	if len(kvs) == 0 {
		return "nothing"
	}
	parts := make([]string, 0, len(kvs))
	for _, kv := range kvs {
		parts = append(parts, fmt.Sprintf("%s=%s@%d", kv.Key, kv.Value, kv.ModRevision))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func seconds(ns int64) float64 { return float64(ns) / 1e9 }
