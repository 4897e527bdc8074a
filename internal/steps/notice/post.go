package notice

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/runbook/runbook/internal/egress"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

// slackTextMax is the longest text a Slack section block accepts.
const slackTextMax = 3000

// payload builds the JSON body for a URL target: the digest in one of the
// known chat-webhook shapes, or the user's body with "{{digest}}",
// "{{title}}" and "{{count}}" replaced inside its strings.
func payload(p *digestParams, digest, title string, count int) ([]byte, error) {
	var v any
	switch p.BodyShape {
	case "text":
		v = map[string]any{"text": digest}
	case "slack":
		block := digest
		if r := []rune(block); len(r) > slackTextMax {
			block = string(r[:slackTextMax-1]) + "…"
		}
		v = map[string]any{
			"text": title,
			"blocks": []any{map[string]any{
				"type": "section",
				"text": map[string]any{"type": "mrkdwn", "text": block},
			}},
		}
	case "teams":
		v = map[string]any{
			"@type":    "MessageCard",
			"@context": "https://schema.org/extensions",
			"summary":  title,
			"title":    title,
			"text":     digest,
		}
	case "custom":
		r := strings.NewReplacer("{{digest}}", digest, "{{title}}", title, "{{count}}", fmt.Sprint(count))
		v = replaceStrings(p.Body, r)
	default:
		return nil, fmt.Errorf("unknown body_shape %q", p.BodyShape)
	}
	return json.Marshal(v)
}

func replaceStrings(v any, r *strings.Replacer) any {
	switch x := v.(type) {
	case string:
		return r.Replace(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = replaceStrings(e, r)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = replaceStrings(e, r)
		}
		return out
	}
	return v
}

// postURL sends body with the idempotency key. Any 2xx is success; other
// answers are classified for the retry policy.
func postURL(ctx context.Context, p *digestParams, body []byte, key string) error {
	rctx, cancel := context.WithTimeout(ctx, p.Timeout.Std())
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, p.URL, bytes.NewReader(body))
	if err != nil {
		return &fault.Error{Code: fault.Invalid, Message: "url " + hostOf(p.URL), Err: err}
	}
	for k, v := range p.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "runbook")
	req.Header.Set("Idempotency-Key", key)
	// The destination policy (config http:) is checked at dial time; the
	// shared transport keeps the connection for the next post.
	client := &http.Client{Transport: egress.Shared(), CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse // a redirected POST may not be repeated safely
	}}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if re := (*egress.RefusedError)(nil); errors.As(err, &re) {
			return &fault.Error{Code: fault.Invalid, Message: "post the digest: " + re.Error()}
		}
		if rctx.Err() != nil {
			return &fault.Error{Code: fault.Timeout, Message: fmt.Sprintf("post the digest to %s: no answer within %s", hostOf(p.URL), p.Timeout), Err: err}
		}
		return &fault.Error{Code: fault.Unavailable, Message: "post the digest to " + hostOf(p.URL), Err: err}
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return nil
	}
	return &fault.Error{
		Code:    fault.CodeForHTTPStatus(resp.StatusCode),
		Message: fmt.Sprintf("post the digest to %s: %s", hostOf(p.URL), resp.Status),
		Data:    map[string]any{"status": resp.StatusCode, "body": string(snippet)},
	}
}

// hostOf shows only scheme and host of a URL: chat webhook URLs carry
// their secret in the path.
func hostOf(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "the target URL"
	}
	return u.Scheme + "://" + u.Host
}

// writeDigestFile writes text to the file target below dir. Appending is
// idempotent: a block already at the end of the file is not added again
// (a resumed step repeats the write it may have done before dying).
func writeDigestFile(dir string, p *digestParams, text string) (string, error) {
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", &fault.Error{Code: fault.Invalid, Message: "open the playbook directory", Err: err}
	}
	defer root.Close()
	if err := localPath("file", p.File); err != nil {
		return "", err
	}
	if d := parentOf(p.File); d != "" {
		if err := root.MkdirAll(d, 0o700); err != nil {
			return "", steps.FileError(fault.Invalid, dir, "create the directory of", p.File, err)
		}
	}
	if p.FileMode == "append" {
		old, err := root.ReadFile(p.File)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", steps.FileError(fault.Invalid, dir, "read", p.File, err)
		}
		if len(old) > 0 {
			block := "\n" + text
			if bytes.HasSuffix(old, []byte(block)) || string(old) == text {
				return p.File, nil
			}
			text = block
		}
		f, err := root.OpenFile(p.File, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return "", steps.FileError(fault.Invalid, dir, "open", p.File, err)
		}
		if _, err := f.WriteString(text); err != nil {
			f.Close()
			return "", steps.FileError(fault.Unavailable, dir, "write", p.File, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return "", steps.FileError(fault.Unavailable, dir, "sync", p.File, err)
		}
		return p.File, f.Close()
	}
	if err := writeAtomic(root, p.File, strings.NewReader(text), -1, true); err != nil {
		return "", err
	}
	return p.File, nil
}
