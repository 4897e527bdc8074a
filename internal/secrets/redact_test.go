package secrets_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/runbook/runbook/internal/secrets"
)

const secret = "s3cr3t/t0ken+v@lue"

func redactor(values ...string) *secrets.Redactor {
	r := secrets.NewRedactor()
	r.Add(values...)
	return r
}

func TestString(t *testing.T) {
	r := redactor(secret, "hunter2")
	cases := []struct {
		name, in, want string
	}{
		{"a plain occurrence is masked", "token=" + secret + ";", "token=***;"},
		{"every occurrence is masked", secret + " and " + secret, "*** and ***"},
		{"two secrets are both masked", "a=" + secret + " b=hunter2", "a=*** b=***"},
		{"standard base64 is masked", "b64=" + base64.StdEncoding.EncodeToString([]byte(secret)), "b64=***"},
		{"unpadded URL-safe base64 is masked", "b64=" + base64.RawURLEncoding.EncodeToString([]byte(secret)), "b64=***"},
		{"a URL query value is masked", "https://x/?t=" + url.QueryEscape(secret), "https://x/?t=***"},
		{"a URL path segment is masked", "https://x/" + url.PathEscape(secret), "https://x/***"},
		{"hex is masked", "hex=" + hex.EncodeToString([]byte(secret)), "hex=***"},
		{"text without secrets is unchanged", "nothing to see", "nothing to see"},
		{"the empty string is unchanged", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.String(tc.in); got != tc.want {
				t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestEncodedSecrets(t *testing.T) {
	r := redactor(`pa"ss<wo>rd\1`)

	t.Run("a secret inside a JSON document is masked", func(t *testing.T) {
		doc, _ := json.Marshal(map[string]string{"password": `pa"ss<wo>rd\1`})
		out := r.String(string(doc))
		if out != `{"password":"***"}` {
			t.Errorf("got %s", out)
		}
	})

	t.Run("a secret inside JSON written without HTML escaping is masked", func(t *testing.T) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode([]string{`pa"ss<wo>rd\1`})
		if out := strings.TrimSpace(r.String(buf.String())); out != `["***"]` {
			t.Errorf("got %s", out)
		}
	})

	t.Run("a secret quoted with %q is masked", func(t *testing.T) {
		if out := r.String(fmt.Sprintf("got %q", `pa"ss<wo>rd\1`)); out != `got "***"` {
			t.Errorf("got %s", out)
		}
	})

	t.Run("a secret inside a basic-auth header is masked at any offset", func(t *testing.T) {
		r := redactor("correct-horse-battery")
		for _, user := range []string{"a", "ab", "abc", "admin"} {
			header := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":correct-horse-battery"))
			out := r.String(header)
			if !strings.Contains(out, "***") {
				t.Errorf("user %q: %s not masked", user, header)
			}
			// What is left cannot be decoded back to the secret.
			if strings.Contains(out, base64.RawStdEncoding.EncodeToString([]byte("horse-battery"))[4:]) {
				t.Errorf("user %q: %s still holds the secret's encoding", user, out)
			}
		}
	})
}

func TestShortValues(t *testing.T) {
	r := redactor("ab", "x", "")
	t.Run("values shorter than three bytes are not masked", func(t *testing.T) {
		if got := r.String("abba x"); got != "abba x" {
			t.Errorf("got %q", got)
		}
		if r.Contains("ab") {
			t.Error("Contains reports a value too short to mask")
		}
	})
	t.Run("a three-byte value is masked", func(t *testing.T) {
		r.Add("abc")
		if got := r.String("xabcx"); got != "x***x" {
			t.Errorf("got %q", got)
		}
	})
}

func TestLongestFirst(t *testing.T) {
	r := redactor("secret", "secret-extended")
	if got := r.String("v=secret-extended!"); got != "v=***!" {
		t.Errorf("got %q: the longer value must win", got)
	}
}

func TestBytesAndContains(t *testing.T) {
	r := redactor(secret)
	t.Run("bytes are masked", func(t *testing.T) {
		if got := r.Bytes([]byte("x" + secret)); string(got) != "x***" {
			t.Errorf("got %q", got)
		}
	})
	t.Run("bytes without secrets come back as they are", func(t *testing.T) {
		in := []byte("clean")
		if got := r.Bytes(in); &got[0] != &in[0] {
			t.Error("clean bytes were copied")
		}
	})
	t.Run("contains sees raw and encoded secrets", func(t *testing.T) {
		if !r.Contains("a"+secret) || !r.Contains(base64.StdEncoding.EncodeToString([]byte(secret))) {
			t.Error("missed a secret")
		}
		if r.Contains("clean") {
			t.Error("false positive")
		}
	})
}

type credentials struct {
	User     string `json:"user"`
	Password string `json:"password"`
}

func TestValue(t *testing.T) {
	r := redactor(secret)
	cases := []struct {
		name string
		in   any
		want any
	}{
		{"strings in nested maps and lists are masked", map[string]any{
			"a": secret, "n": 1.5, "ok": true, "nil": nil,
			"list": []any{"x", "y-" + secret, map[string]any{"deep": secret}},
		}, map[string]any{
			"a": "***", "n": 1.5, "ok": true, "nil": nil,
			"list": []any{"x", "y-***", map[string]any{"deep": "***"}},
		}},
		{"map keys are masked", map[string]any{secret: "v"}, map[string]any{"***": "v"}},
		{"string maps are masked", map[string]string{"k": secret}, map[string]string{"k": "***"}},
		{"string lists are masked", []string{secret, "x"}, []string{"***", "x"}},
		{"a plain string is masked", secret, "***"},
		{"numbers pass through", 42, 42},
		{"a struct holding a secret becomes masked JSON values", credentials{User: "kim", Password: secret},
			map[string]any{"user": "kim", "password": "***"}},
		{"a struct without secrets is kept as it is", credentials{User: "kim"}, credentials{User: "kim"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := r.Value(tc.in)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}

	t.Run("keys that mask alike are all kept", func(t *testing.T) {
		got := r.Value(map[string]any{"a" + secret: 1, "a***": 2}).(map[string]any)
		if len(got) != 2 {
			t.Errorf("got %v, want two keys", got)
		}
	})

	t.Run("the input is not modified", func(t *testing.T) {
		in := map[string]any{"a": secret, "l": []any{secret}}
		_ = r.Value(in)
		if in["a"] != secret || in["l"].([]any)[0] != secret {
			t.Errorf("input changed: %v", in)
		}
	})
}

func TestNothingRegistered(t *testing.T) {
	r := secrets.NewRedactor()
	s := strings.Repeat("log line ", 10)
	b := []byte(s)
	m := map[string]any{"k": "v"}
	allocs := testing.AllocsPerRun(100, func() {
		_ = r.String(s)
		_ = r.Bytes(b)
		_ = r.Contains(s)
		_ = r.Value(m)
	})
	if allocs != 0 {
		t.Errorf("%v allocations with nothing registered", allocs)
	}
	if got := r.Value(m); reflect.ValueOf(got).Pointer() != reflect.ValueOf(m).Pointer() {
		t.Error("value was copied with nothing registered")
	}
	var zero secrets.Redactor
	zero.Add(secret)
	if zero.String(secret) != "***" {
		t.Error("the zero Redactor does not mask")
	}
}

func TestConcurrentUse(t *testing.T) {
	r := secrets.NewRedactor()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			v := fmt.Sprintf("secret-number-%d", i)
			r.Add(v)
			if got := r.String("x " + v); got != "x ***" {
				t.Errorf("got %q", got)
			}
		})
	}
	wg.Wait()
}

func TestHandler(t *testing.T) {
	var buf bytes.Buffer
	r := secrets.NewRedactor()
	log := slog.New(r.Handler(slog.NewJSONHandler(&buf, nil)))
	// Attached before the secret is known: still masked once it is.
	log = log.With("early", "tok="+secret).WithGroup("g").With("inner", secret)
	r.Add(secret)

	log.Info("calling with "+secret,
		"plain", secret,
		"num", 3,
		"err", errors.New("401 for "+secret),
		slog.Group("grp", "deep", secret),
		"map", map[string]any{"authorization": "Bearer " + secret},
		"valuer", valuer{},
		secret, "as-key",
	)
	out := buf.String()
	if strings.Contains(out, secret) {
		t.Fatalf("secret leaked: %s", out)
	}
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"msg": "calling with ***", "early": "tok=***",
	}
	for k, v := range want {
		if rec[k] != v {
			t.Errorf("%s = %v, want %v", k, rec[k], v)
		}
	}
	g := rec["g"].(map[string]any)
	checks := map[string]any{
		"inner": "***", "plain": "***", "num": 3.0, "err": "401 for ***",
		"grp":    map[string]any{"deep": "***"},
		"map":    map[string]any{"authorization": "Bearer ***"},
		"valuer": "resolved ***",
		"***":    "as-key",
	}
	for k, v := range checks {
		if !reflect.DeepEqual(g[k], v) {
			t.Errorf("g.%s = %#v, want %#v", k, g[k], v)
		}
	}
}

func TestHandlerWithoutSecrets(t *testing.T) {
	var buf bytes.Buffer
	r := secrets.NewRedactor()
	log := slog.New(r.Handler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})))
	log.With("a", 1).Info("hidden by level")
	log.With("a", 1).Warn("shown", "b", "c")
	if got := buf.String(); strings.Contains(got, "hidden") || !strings.Contains(got, `msg=shown a=1 b=c`) {
		t.Errorf("got %q", got)
	}
	if !r.Handler(slog.NewTextHandler(&buf, nil)).Enabled(context.Background(), slog.LevelInfo) {
		t.Error("Enabled is not delegated")
	}
}

type valuer struct{}

func (valuer) LogValue() slog.Value { return slog.StringValue("resolved " + secret) }
