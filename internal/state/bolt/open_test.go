package bolt_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

const holdEnv = "RUNBOOK_BOLT_TEST_HOLD"

// TestMain runs the test binary as a helper process when holdEnv is set
// (holdInSubprocess): it opens that state file, says "held", and keeps it
// until stdin closes. Otherwise it runs the tests.
func TestMain(m *testing.M) {
	path := os.Getenv(holdEnv)
	if path == "" {
		os.Exit(m.Run())
	}
	s, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("held")
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = s.Close()
	os.Exit(0)
}

// holdInSubprocess opens path from another process and returns a function
// that makes it close the file and exit.
func holdInSubprocess(t *testing.T, path string) (release func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), holdEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	must(t, err)
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	cmd.Stderr = os.Stderr
	must(t, cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "held" {
		_ = cmd.Process.Kill()
		t.Fatalf("helper process: %q, %v", line, err)
	}
	done := false
	release = func() {
		if done {
			return
		}
		done = true
		_ = stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("helper process: %v", err)
		}
	}
	t.Cleanup(release)
	return release
}

func TestLocked(t *testing.T) {
	t.Run("a file held by another process is refused with a hint naming it", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.db")
		release := holdInSubprocess(t, path)

		start := time.Now()
		_, err := bolt.Open(path, bolt.Options{})
		elapsed := time.Since(start)
		if !errors.Is(err, state.ErrLocked) {
			t.Fatalf("error = %v, want ErrLocked", err)
		}
		for _, want := range []string{path, "another process", "runbook serve", "--state"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %q", err, want)
			}
		}
		if elapsed < 900*time.Millisecond || elapsed > 3*time.Second {
			t.Errorf("gave up after %v, want about the 1s default", elapsed)
		}

		_, err = bolt.Open(path, bolt.Options{ReadOnly: true, Timeout: 100 * time.Millisecond})
		if !errors.Is(err, state.ErrLocked) {
			t.Fatalf("read-only open: error = %v, want ErrLocked", err)
		}

		release()
		s, err := bolt.Open(path, bolt.Options{Timeout: 100 * time.Millisecond})
		must(t, err)
		must(t, s.Close())
	})

	t.Run("a second open in the same process waits for the first", func(t *testing.T) {
		s, path := openTemp(t, bolt.Options{})
		_, err := bolt.Open(path, bolt.Options{Timeout: 100 * time.Millisecond})
		if !errors.Is(err, state.ErrLocked) {
			t.Fatalf("error = %v, want ErrLocked", err)
		}
		must(t, s.Close())
		s2, err := bolt.Open(path, bolt.Options{Timeout: 100 * time.Millisecond})
		must(t, err)
		must(t, s2.Close())
	})

	t.Run("readers share a file", func(t *testing.T) {
		s, path := openTemp(t, bolt.Options{})
		must(t, s.Close())
		r1, err := bolt.Open(path, bolt.Options{ReadOnly: true, Timeout: 100 * time.Millisecond})
		must(t, err)
		defer r1.Close()
		r2, err := bolt.Open(path, bolt.Options{ReadOnly: true, Timeout: 100 * time.Millisecond})
		must(t, err)
		defer r2.Close()
	})
}

// populated returns the bytes of a state file holding a few runs, large
// enough to span many pages.
func populated(t *testing.T) []byte {
	t.Helper()
	s, path := openTemp(t, bolt.Options{NoSync: true})
	for i := range 40 {
		id := fmt.Sprintf("run-%02d", i)
		must(t, s.CreateRun(ctx, &state.Run{ID: id, Playbook: "pb", Snapshot: bytes.Repeat([]byte("x"), 5000)}))
		must(t, s.SaveStep(ctx, &state.StepRecord{RunID: id, ID: "a"}, state.Event{Type: "step.started"}))
	}
	must(t, s.Close())
	data, err := os.ReadFile(path)
	must(t, err)
	return data
}

// foreignBolt returns the bytes of a bbolt file made by some other program.
func foreignBolt(t *testing.T, fill func(tx *bbolt.Tx) error) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	must(t, err)
	must(t, db.Update(fill))
	must(t, db.Close())
	data, err := os.ReadFile(path)
	must(t, err)
	return data
}

func TestCorrupt(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 64<<10)
	for i := range random {
		random[i] = byte(rng.UintN(256))
	}
	good := populated(t)
	garbled := bytes.Clone(good)
	for i := 4 * 4096; i < len(garbled); i++ { // keep the meta pages, garble the rest
		garbled[i] = byte(rng.UintN(256))
	}

	middle := bytes.Clone(good)
	for i := 10 * 4096; i < 30*4096; i++ { // the freelist is near the end
		middle[i] = byte(rng.UintN(256))
	}
	zeroed := bytes.Clone(good)
	clear(zeroed[4*4096 : len(zeroed)-8*4096])

	cases := []struct {
		name string
		data []byte
	}{
		{"random bytes are refused", random},
		{"a text file is refused", []byte("connections:\n  nks: {region: kr1}\n")},
		{"a file shorter than a page is refused", good[:100]},
		{"a file cut after its meta pages is refused", good[:2*4096+10]},
		{"a file cut in half is refused", good[:len(good)/2]},
		{"a file with garbled data pages is refused", garbled},
		{"a file garbled in the middle is refused", middle},
		{"a file with zeroed data pages is refused", zeroed},
		{"a bbolt file of another program is refused", foreignBolt(t, func(tx *bbolt.Tx) error {
			b, err := tx.CreateBucket([]byte("widgets"))
			if err != nil {
				return err
			}
			return b.Put([]byte("k"), []byte("v"))
		})},
		{"a file with a garbage format version is refused", foreignBolt(t, func(tx *bbolt.Tx) error {
			b, err := tx.CreateBucket([]byte("meta"))
			if err != nil {
				return err
			}
			return b.Put([]byte("format_version"), []byte("one"))
		})},
	}
	for _, tc := range cases {
		t.Run(tc.name+" and left untouched", func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			must(t, os.WriteFile(path, tc.data, 0o600))

			s, err := bolt.Open(path, bolt.Options{Timeout: 200 * time.Millisecond})
			if err == nil {
				// Damage the check did not reach must surface as
				// ErrCorrupt from the first read that meets it.
				_, err = s.ListRuns(ctx, state.RunFilter{})
				if err == nil {
					_, err = s.Steps(ctx, "run-07")
				}
				_ = s.Close()
			}
			if !errors.Is(err, state.ErrCorrupt) {
				t.Fatalf("error = %v, want ErrCorrupt", err)
			}
			t.Log(err)
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
			after, rerr := os.ReadFile(path)
			must(t, rerr)
			if !bytes.Equal(after, tc.data) {
				t.Fatalf("the file was modified (%d bytes before, %d after)", len(tc.data), len(after))
			}

			// The refusal released the file: restored in place from a
			// good copy, it opens in this process.
			must(t, os.WriteFile(path, good, 0o600))
			s, err = bolt.Open(path, bolt.Options{Timeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatalf("open after restoring the file: %v", err)
			}
			must(t, s.Close())
		})
	}

	t.Run("verifying finds damage deep in a file before it is used", func(t *testing.T) {
		// Every data page garbled but those an open reads (the root, the
		// meta bucket's, the freelist): only a verification finds it.
		deep := bytes.Clone(good)
		f := newBoltFile(good)
		keep := map[int]bool{f.freelist(): true, int(ne.Uint64(good[f.meta(true)+16:])): true}
		cp := filepath.Join(t.TempDir(), "copy.db")
		must(t, os.WriteFile(cp, good, 0o600))
		db, err := bbolt.Open(cp, 0o600, &bbolt.Options{Timeout: time.Second, ReadOnly: true})
		must(t, err)
		must(t, db.View(func(tx *bbolt.Tx) error { keep[int(tx.Bucket([]byte("meta")).Root())] = true; return nil }))
		must(t, db.Close())
		for id := range keep { // and their overflow pages
			for n := range int(ne.Uint32(good[id*f.pageSize+12:])) {
				keep[id+1+n] = true
			}
		}
		for id := 4; id < len(good)/f.pageSize; id++ {
			if !keep[id] {
				for i := id * f.pageSize; i < (id+1)*f.pageSize; i++ {
					deep[i] = byte(rng.UintN(256))
				}
			}
		}
		path := filepath.Join(t.TempDir(), "state.db")
		must(t, os.WriteFile(path, deep, 0o600))
		s, err := bolt.Open(path, bolt.Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("open without verifying: %v", err)
		}
		must(t, s.Close())
		_, err = bolt.Open(path, bolt.Options{Verify: true})
		if !errors.Is(err, state.ErrCorrupt) {
			t.Fatalf("error = %v, want ErrCorrupt", err)
		}
		t.Log(err)
		after, err := os.ReadFile(path)
		must(t, err)
		if !bytes.Equal(after, deep) {
			t.Fatal("the file was modified")
		}
	})

	t.Run("verifying passes an intact file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.db")
		must(t, os.WriteFile(path, good, 0o600))
		s, err := bolt.Open(path, bolt.Options{Verify: true})
		must(t, err)
		must(t, s.Close())
	})

	t.Run("a file from a newer runbook is refused and left untouched", func(t *testing.T) {
		data := foreignBolt(t, func(tx *bbolt.Tx) error {
			b, err := tx.CreateBucket([]byte("meta"))
			if err != nil {
				return err
			}
			return b.Put([]byte("format_version"), []byte(fmt.Sprint(state.FormatVersion+1)))
		})
		path := filepath.Join(t.TempDir(), "state.db")
		must(t, os.WriteFile(path, data, 0o600))
		_, err := bolt.Open(path, bolt.Options{})
		if err == nil || !strings.Contains(err.Error(), "newer runbook") || !strings.Contains(err.Error(), path) {
			t.Fatalf("error = %v, want a newer-version refusal naming the file", err)
		}
		after, err := os.ReadFile(path)
		must(t, err)
		if !bytes.Equal(after, data) {
			t.Fatal("the file was modified")
		}
	})

	// A file a pre-release build wrote in an earlier format (its runs
	// as that build left them, here the marker alone differs): this build
	// does not upgrade it, and says what the file is and what to do.
	for _, version := range []int{1, 3, state.FormatVersion - 1} {
		t.Run(fmt.Sprintf("a file of format %d, a pre-release build's, is refused and left untouched", version), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			must(t, os.WriteFile(path, good, 0o600))
			db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
			must(t, err)
			must(t, db.Update(func(tx *bbolt.Tx) error {
				return tx.Bucket([]byte("meta")).Put([]byte("format_version"), []byte(fmt.Sprint(version)))
			}))
			must(t, db.Close())
			data, err := os.ReadFile(path)
			must(t, err)
			for _, opts := range []bolt.Options{{}, {ReadOnly: true}} {
				_, err := bolt.Open(path, opts)
				if err == nil {
					t.Fatalf("open (read-only %v) of a format %d file succeeded", opts.ReadOnly, version)
				}
				t.Log(err)
				for _, want := range []string{path, fmt.Sprintf("format version %d", version), "written by a pre-release build of runbook",
					"does not upgrade it", "delete the file", "read it with the build that wrote it"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
				if errors.Is(err, state.ErrCorrupt) {
					t.Errorf("error %q calls the file damaged", err)
				}
			}
			after, err := os.ReadFile(path)
			must(t, err)
			if !bytes.Equal(after, data) {
				t.Fatal("the file was modified")
			}
		})
	}

	t.Run("an intact file still opens", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.db")
		must(t, os.WriteFile(path, good, 0o600))
		s, err := bolt.Open(path, bolt.Options{})
		must(t, err)
		defer s.Close()
		runs, err := s.ListRuns(ctx, state.RunFilter{})
		must(t, err)
		if len(runs) != 40 {
			t.Fatalf("listed %d runs, want 40", len(runs))
		}
	})
}
