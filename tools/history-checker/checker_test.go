package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

type expectation struct {
	Result string   `json:"result"`
	Kinds  []string `json:"kinds"`
	Lost   []string `json:"lost"`
}

// The hand-made histories of testdata/ give the verdicts testdata/expected.json says
// (crates/operator/tests/history_checker.rs runs the built binary on the same files).
func TestFixtures(t *testing.T) {
	text, err := os.ReadFile("testdata/expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var expected map[string]expectation
	if err := json.Unmarshal(text, &expected); err != nil {
		t.Fatal(err)
	}
	for name, want := range expected {
		t.Run(name, func(t *testing.T) {
			h, err := loadHistory(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			report := check(h, options{timeout: 10 * time.Second, visualize: "failure", outDir: dir})
			if report.Result != want.Result {
				t.Errorf("result %s, want %s: %s", report.Result, want.Result, report.details())
			}
			kinds := map[string]bool{}
			for _, v := range report.Violations {
				kinds[v.Kind] = true
			}
			var got []string
			for k := range kinds {
				got = append(got, k)
			}
			sort.Strings(got)
			if strings.Join(got, ",") != strings.Join(want.Kinds, ",") {
				t.Errorf("violation kinds %v, want %v: %s", got, want.Kinds, report.details())
			}
			var lost []string
			for _, w := range report.LostWrites {
				lost = append(lost, fmt.Sprintf("%s=%s@%d", w.Key, w.Value, w.Revision))
			}
			if strings.Join(lost, ",") != strings.Join(want.Lost, ",") {
				t.Errorf("lost %v, want %v", lost, want.Lost)
			}
			if report.Result != resultOK {
				if _, err := os.Stat(filepath.Join(dir, "visualization.html")); err != nil {
					t.Errorf("a failing history gets a visualization: %v", err)
				}
			}
		})
	}
}

func TestBadInputIsRefusedWithTheReason(t *testing.T) {
	cases := map[string]string{
		`{"version": 2}`: "version 2",
		`{"version": 1, "prefix": "t/", "keys": ["t/a"], "clients": [{"id": 0}], "operations": [{"client": 0, "call": 5, "return": 4, "type": "get", "key": "t/a", "status": "ok", "revision": 1}]}`:                                                                                                                                "returns (4) before its call (5)",
		`{"version": 1, "prefix": "t/", "keys": ["t/a"], "clients": [{"id": 0}], "operations": [{"client": 0, "call": 1, "return": 2, "type": "put", "key": "t/a", "value": "x", "status": "ok", "revision": 1}, {"client": 0, "call": 3, "return": 4, "type": "put", "key": "t/a", "value": "x", "status": "ok", "revision": 2}]}`: "written twice",
		`{"version": 1, "prefix": "t/", "keys": ["t/a"], "clients": [{"id": 0}], "operations": [{"client": 0, "call": 1, "return": 2, "type": "get", "key": "t/b", "status": "ok", "revision": 1}]}`:                                                                                                                                "not one of the history's keys",
		`{"version": 1, "surprise": true}`: "unknown field",
	}
	for input, want := range cases {
		_, err := readHistory(strings.NewReader(input))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one saying %q", input, err, want)
		}
	}
}

func TestBookmarkFixVersions(t *testing.T) {
	for version, unreliable := range map[string]bool{
		"3.4.23": true, "3.4.25": false, "3.5.1": true, "3.5.7": true, "3.5.8": false,
		"3.6.17": false, "v3.5.1": true, "": false,
	} {
		if got := bookmarkUnreliable(version); got != unreliable {
			t.Errorf("%q: %v, want %v", version, got, unreliable)
		}
	}
}

// Writes to other keys after the workload's last one move the final revision on, and a watch
// of the workload's prefix (the replay asks for no progress notification) cannot see them: it
// is complete when it reached the workload's last write, and incomplete when it did not.
func TestWatchesAreBoundToTheLastWriteOfTheWorkloadsKeys(t *testing.T) {
	run := func(edit func(h *History)) *Report {
		h, err := loadHistory(filepath.Join("testdata", "pass-concurrent.json"))
		if err != nil {
			t.Fatal(err)
		}
		edit(h)
		return check(h, options{timeout: 10 * time.Second, visualize: "never", outDir: t.TempDir()})
	}
	later := run(func(h *History) {
		h.FinalRevision += 3
		for i := range h.Watches {
			h.Watches[i].Progress = nil
		}
	})
	if later.Result != resultOK {
		t.Errorf("other keys' writes after the last one: %s", later.details())
	}
	short := run(func(h *History) {
		for i := range h.Watches {
			if h.Watches[i].Replay {
				h.Watches[i].Events = h.Watches[i].Events[:len(h.Watches[i].Events)-1]
			}
		}
	})
	found := false
	for _, v := range short.Violations {
		found = found || v.Kind == kindWatchIncomplete
	}
	if !found {
		t.Errorf("a replay short of the last write is incomplete: %s", short.details())
	}
}

// A progress notification never goes back within one stream; after a resume the watch may be
// on a member that has applied less, whose lower notification is noted, not a violation. An
// event at or below a notification from before the resume is still one.
func TestProgressGoesBackOnlyAcrossAResume(t *testing.T) {
	run := func(edit func(w *Watch)) *Report {
		h, err := loadHistory(filepath.Join("testdata", "pass-concurrent.json"))
		if err != nil {
			t.Fatal(err)
		}
		for i := range h.Watches {
			if h.Watches[i].Name == "service" {
				edit(&h.Watches[i])
			}
		}
		return check(h, options{timeout: 10 * time.Second, visualize: "never", outDir: t.TempDir()})
	}
	kinds := func(r *Report) string {
		var got []string
		for _, v := range r.Violations {
			got = append(got, v.Kind)
		}
		return strings.Join(got, ",")
	}
	// The stream cut at 700 said rev 13; the resumed one first says rev 12 (its member had
	// applied up to there), then 17.
	across := run(func(w *Watch) {
		w.Progress = []Progress{{At: 660, Revision: 13}, {At: 800, Revision: 12}, {At: 900, Revision: 12}, {At: 2000, Revision: 17}}
	})
	if across.Result != resultOK {
		t.Errorf("a lower notification after a resume: %s", across.details())
	}
	noted := false
	for _, n := range across.Notes {
		noted = noted || strings.Contains(n, "behind rev 13 before")
	}
	if !noted {
		t.Errorf("a lower notification after a resume is noted: %v", across.Notes)
	}
	// The same within one stream (no resume) is a violation.
	within := run(func(w *Watch) {
		w.Progress = []Progress{{At: 660, Revision: 13}, {At: 800, Revision: 12}, {At: 2000, Revision: 17}}
		w.Resumes = nil
	})
	if kinds(within) != kindWatchProgress {
		t.Errorf("a lower notification within one stream: %s", within.details())
	}
	// Going back within the resumed stream is a violation too.
	later := run(func(w *Watch) {
		w.Progress = []Progress{{At: 660, Revision: 13}, {At: 1300, Revision: 14}, {At: 1400, Revision: 12}, {At: 2000, Revision: 17}}
	})
	if kinds(later) != kindWatchProgress {
		t.Errorf("a lower notification within the resumed stream: %s", later.details())
	}
	// An event at or below the notification from before the resume is a violation on an etcd
	// whose notifications follow its events (3.6.17 here).
	behind := run(func(w *Watch) {
		w.Progress = []Progress{{At: 660, Revision: 14}, {At: 2000, Revision: 17}}
	})
	if kinds(behind) != kindWatchProgress {
		t.Errorf("an event after a resume at or below an earlier notification: %s", behind.details())
	}
}
