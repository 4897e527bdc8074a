package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkServeDelivery1000Hooks posts one UNSUBSCRIBE delivery of 1,000
// hooks to a real `runbook serve` (the shipped sms-unsubscribe playbook,
// a fresh state file per iteration) on loopback and reports the answer
// time (ms/answer) and the state file's growth when the answer arrives
// (MB-state/answer). The runs it starts finish before the next iteration.
//
//	go test -run '^$' -bench ServeDelivery1000Hooks -benchtime 3x ./cmd/runbook
func BenchmarkServeDelivery1000Hooks(b *testing.B) {
	src, err := os.ReadFile(filepath.Join("..", "..", "playbooks", "sms-unsubscribe.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	body := thousandHooks(1000)
	var answer time.Duration
	var grown int64
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		dir := b.TempDir()
		for name, data := range map[string]string{
			"playbooks/sms-unsubscribe.yaml": string(src),
			"runbook.yaml":                   "server: {reload: false}\nwebhooks:\n  routes:\n    sms: {secret: SMS_WEBHOOK_SECRET}\n",
		} {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o700); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
				b.Fatal(err)
			}
		}
		statePath := filepath.Join(dir, "state.db")
		cmd, url := benchServe(b, dir, statePath)
		before := fileSize(b, statePath)
		req, _ := http.NewRequest("POST", url+"/hooks/sms", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json;charset=UTF-8")
		req.Header.Set("X-Cloud-Webhook-Signature", "bench-secret")
		b.StartTimer()
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		ans, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answer += time.Since(start)
		b.StopTimer()
		if resp.StatusCode != 200 {
			b.Fatalf("delivery %d answered %d: %s", i, resp.StatusCode, ans)
		}
		grown += fileSize(b, statePath) - before
		benchWaitRuns(b, url)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
	b.ReportMetric(float64(answer.Milliseconds())/float64(b.N), "ms/answer")
	b.ReportMetric(float64(grown)/1e6/float64(b.N), "MB-state/answer")
}

func benchServe(b *testing.B, dir, statePath string) (*exec.Cmd, string) {
	b.Helper()
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--config", filepath.Join(dir, "runbook.yaml"), "--state", statePath)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "SMS_WEBHOOK_SECRET=bench-secret",
		"RUNBOOK_API_TOKEN=" + serveToken, "SMS_SUPPRESSION_FILE=" + filepath.Join(dir, "suppression.txt"), "RUNBOOK_FILE_ROOTS=" + dir}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if m := listeningRe.FindStringSubmatch(sc.Text()); m != nil {
			go func() { _, _ = io.Copy(io.Discard, out) }()
			return cmd, m[1]
		}
	}
	b.Fatal("runbook serve exited before listening")
	return nil, ""
}

// benchWaitRuns waits until no run is pending, running or waiting.
func benchWaitRuns(b *testing.B, url string) {
	b.Helper()
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		req, _ := http.NewRequest("GET", url+"/api/v1/runs?status=pending,running,waiting&limit=1", nil)
		req.Header.Set("Authorization", "Bearer "+serveToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		var list struct{ Runs []json.RawMessage }
		err = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if err == nil && len(list.Runs) == 0 {
			return
		}
	}
	b.Fatal("runs still open after 5 minutes")
}

func fileSize(b *testing.B, path string) int64 {
	b.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}

// thousandHooks is an UNSUBSCRIBE delivery of n hooks.
func thousandHooks(n int) []byte {
	hooks := make([]map[string]any, n)
	for i := range hooks {
		hooks[i] = map[string]any{"hookId": fmt.Sprintf("5f0c1d2e-9a8b-4c7d-8e6f-%012d", i), "recipientNo": fmt.Sprintf("010%08d", 20000000+i),
			"unsubscribeNo": "0808885555", "enterpriseName": "runbook", "createdDateTime": "2026-11-22T09:00:00.000+09:00"}
	}
	body, _ := json.Marshal(map[string]any{"hooksId": fmt.Sprintf("bench-%d", time.Now().UnixNano()), "webhookConfigId": "cfg",
		"productName": "SMS", "appKey": "app", "event": "UNSUBSCRIBE", "hooks": hooks})
	return body
}
