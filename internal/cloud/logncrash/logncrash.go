package logncrash

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/cloud/httpcall"
	"github.com/runbook/runbook/internal/fault"
)

// DefaultURL is the public collector.
const DefaultURL = "https://api-logncrash.nhncloudservice.com"

// Defaults of a log.
const (
	DefaultLevel          = "INFO"
	DefaultProjectVersion = "1.0.0"
	DefaultLogSource      = "runbook"
	DefaultLogType        = "log"
	LogVersion            = "v2"
	MaxFieldName          = 64
	MaxFields             = 100
)

// Levels are the accepted log levels, lowest first.
var Levels = []string{"DEBUG", "INFO", "WARN", "ERROR", "FATAL"}

// Reserved names a custom field may not take (compared without case):
// the fields of the log itself and the ones the service fills in.
var Reserved = []string{
	"projectName", "projectVersion", "logVersion", "body", "logLevel", "logSource", "logType", "host",
	"sendTime", "logTime", "createTime", "lncBulkIndex", "transactionID", "txnId", "platform",
	"DmpData", "DmpReport", "SessionID", "UserID", "Crash", "SymMethod", "SymResult", "logID",
}

var fieldName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`) })

// ValidField reports why name cannot be a custom field ("" when it can).
func ValidField(name string) string {
	switch {
	case name == "":
		return "a field name may not be empty"
	case len(name) > MaxFieldName:
		return fmt.Sprintf("field name %q is longer than %d characters", name, MaxFieldName)
	case !fieldName().MatchString(name):
		return fmt.Sprintf("field name %q must be letters, digits and _, starting with a letter", name)
	}
	for _, r := range Reserved {
		if strings.EqualFold(r, name) {
			return fmt.Sprintf("field name %q is reserved", name)
		}
	}
	return ""
}

// ValidLevel reports whether level is one of Levels.
func ValidLevel(level string) bool {
	for _, l := range Levels {
		if l == level {
			return true
		}
	}
	return false
}

// Log is one log line.
type Log struct {
	Message        string
	Level          string // default INFO
	ProjectVersion string // default 1.0.0
	LogSource      string // default runbook
	LogType        string // default log
	Host           string // default: this machine's name
	// Fields are custom fields. Strings, numbers and booleans are sent as
	// they are; other values as their JSON text.
	Fields map[string]any
}

// Config configures a Client.
type Config struct {
	BaseURL     string // default DefaultURL
	AppKey      string
	HTTPClient  *http.Client
	MaxAttempts int // default 4; 1 disables retries
	Sleep       func(ctx context.Context, d time.Duration) error
	Now         func() time.Time
}

// ConfigFrom reads a connection map: base_url (default DefaultURL) and
// appkey (required).
func ConfigFrom(conn map[string]any) (Config, error) {
	var cfg Config
	for _, f := range []struct {
		key string
		dst *string
	}{{"base_url", &cfg.BaseURL}, {"appkey", &cfg.AppKey}} {
		v, ok := conn[f.key]
		if !ok || v == nil {
			continue
		}
		s, ok := v.(string)
		if !ok {
			return Config{}, fault.Errorf(fault.Invalid, "logncrash connection: %s must be a string (got %T)", f.key, v)
		}
		*f.dst = strings.TrimSpace(s)
	}
	return cfg, nil
}

// Client sends logs. It is safe for concurrent use.
type Client struct {
	cfg      Config
	endpoint string
	policy   httpcall.Policy
}

// New checks cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	if cfg.AppKey == "" {
		return nil, fault.Errorf(fault.Invalid, "logncrash: appkey is required (the Log & Crash Search project's appkey)")
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 4
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fault.Errorf(fault.Invalid, "logncrash: base_url must be an http(s) URL with a host (got %q)", cfg.BaseURL)
	}
	// The retry policy: a log is sent again after 429, 5xx and connection
	// failures, though the collector may have stored it: a duplicate line
	// is acceptable (the step says so), a lost one is not.
	policy := httpcall.Policy{
		Attempts: cfg.MaxAttempts, Backoff: 500 * time.Millisecond, MaxBackoff: 10 * time.Second, MaxRetryAfter: time.Minute,
		Repeat: httpcall.Always, Client: cfg.HTTPClient, Sleep: cfg.Sleep, Now: cfg.Now,
	}
	return &Client{cfg: cfg, endpoint: base + "/v2/log", policy: policy}, nil
}

// Body returns the JSON object Send posts for l (after defaults), or an
// Invalid error.
func (c *Client) Body(l Log) (map[string]any, error) {
	if strings.TrimSpace(l.Message) == "" {
		return nil, fault.Errorf(fault.Invalid, "logncrash: the message is empty")
	}
	if l.Level == "" {
		l.Level = DefaultLevel
	}
	l.Level = strings.ToUpper(l.Level)
	if !ValidLevel(l.Level) {
		return nil, fault.Errorf(fault.Invalid, "logncrash: level %q is not one of %s", l.Level, strings.Join(Levels, ", "))
	}
	if len(l.Fields) > MaxFields {
		return nil, fault.Errorf(fault.Invalid, "logncrash: %d custom fields, at most %d", len(l.Fields), MaxFields)
	}
	body := map[string]any{
		"projectName":    c.cfg.AppKey,
		"projectVersion": or(l.ProjectVersion, DefaultProjectVersion),
		"logVersion":     LogVersion,
		"body":           l.Message,
		"logLevel":       l.Level,
		"logSource":      or(l.LogSource, DefaultLogSource),
		"logType":        or(l.LogType, DefaultLogType),
		"host":           or(l.Host, hostname()),
	}
	for k, v := range l.Fields {
		if msg := ValidField(k); msg != "" {
			return nil, &fault.Error{Code: fault.Invalid, Message: "logncrash: " + msg, Data: map[string]any{"field": k}}
		}
		switch v.(type) {
		case string, bool, int, int64, float64, json.Number, nil:
			body[k] = v
		default:
			b, err := json.Marshal(v)
			if err != nil {
				return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("logncrash: field %q", k), Err: err}
			}
			body[k] = string(b)
		}
	}
	return body, nil
}

func or(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return h
}

// Envelope is the collector's answer.
type Envelope struct {
	Header struct {
		IsSuccessful  bool   `json:"isSuccessful"`
		ResultCode    int    `json:"resultCode"`
		ResultMessage string `json:"resultMessage"`
	} `json:"header"`
}

// Send posts one log.
func (c *Client) Send(ctx context.Context, l Log) error {
	body, err := c.Body(l)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return &fault.Error{Code: fault.Internal, Message: "logncrash: encoding the log", Err: err}
	}
	const op = "logncrash: POST /v2/log"
	_, err = httpcall.Do(ctx, c.policy, httpcall.Call{
		Op: op,
		Request: func(ctx context.Context) (*http.Request, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(raw))
			if err != nil {
				return nil, &fault.Error{Code: fault.Invalid, Message: op, Err: err}
			}
			req.Header.Set("Content-Type", "application/json")
			return req, nil
		},
		Read: func(resp *http.Response) error {
			defer resp.Body.Close()
			answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			return check(op, resp.StatusCode, answer, err)
		},
		Failed: func(resp *http.Response, answer []byte) error { return check(op, resp.StatusCode, answer, nil) },
	})
	return err
}

// check classifies the collector's answer.
func check(op string, status int, raw []byte, readErr error) error {
	var env Envelope
	parsed := readErr == nil && json.Unmarshal(raw, &env) == nil && (env.Header.ResultMessage != "" || env.Header.IsSuccessful)
	data := map[string]any{"http_status": status}
	if parsed {
		data["result_code"], data["result_message"] = env.Header.ResultCode, env.Header.ResultMessage
	}
	if status/100 == 2 {
		switch {
		case readErr != nil:
			return &fault.Error{Code: fault.Unavailable, Message: op + ": reading the answer", Err: readErr, Data: data}
		case !parsed:
			return &fault.Error{Code: fault.Unavailable, Message: fmt.Sprintf("%s: HTTP %d without the collector's envelope", op, status), Data: data}
		case !env.Header.IsSuccessful:
			return &fault.Error{Code: fault.Invalid, Data: data,
				Message: fmt.Sprintf("%s: refused (resultCode %d: %s)", op, env.Header.ResultCode, env.Header.ResultMessage)}
		}
		return nil
	}
	msg := http.StatusText(status)
	if parsed {
		msg = fmt.Sprintf("resultCode %d: %s", env.Header.ResultCode, env.Header.ResultMessage)
	}
	return &fault.Error{Code: fault.CodeForHTTPStatus(status), Data: data, Message: fmt.Sprintf("%s: HTTP %d: %s", op, status, msg)}
}
