package trigger

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
)

// SignatureHeaders are the headers that carry a webhook's shared secret:
// the spec's name first, then the names real senders use (FIDELITY). The
// value is the string entered at setup, sent verbatim (not an HMAC).
var SignatureHeaders = []string{"X-Cloud-Webhook-Signature", "X-Toast-Webhook-Signature", "X-Nhn-Webhook-Signature"}

// Defaults of IntakeOptions.
const (
	DefaultMaxBody  = 1 << 20
	DefaultDedupTTL = 7 * 24 * time.Hour
)

// Route is one configured webhook route.
type Route struct {
	// Verify is how a delivery proves its sender: VerifyShared ("" too),
	// the messaging service's envelope under a shared secret, or
	// VerifyStandard, Standard Webhooks over any JSON body.
	Verify string
	// Secret is what the sender was set up with: the shared signature, or
	// a whsec_ secret; required.
	Secret string
	// Secrets are more secrets accepted as well as Secret (a rotation).
	Secrets []string
}

// secrets lists every secret the route accepts.
func (r Route) secrets() []string { return append([]string{r.Secret}, r.Secrets...) }

// IntakeOptions configure NewIntake.
type IntakeOptions struct {
	Routes map[string]Route // by route name (the path after /hooks/)
	Store  state.Store      // dedup keys and delivery records
	// Starter prepares the runs a delivery starts, which the intake
	// commits with the delivery's claims and body, then launches.
	Starter Preparer
	// Playbooks returns the current set; a reload swaps what it returns.
	Playbooks func() []*playbook.Playbook
	Logger    *slog.Logger     // default: discard
	MaxBody   int64            // default DefaultMaxBody
	DedupTTL  time.Duration    // default DefaultDedupTTL
	Now       func() time.Time // for expressions and webhook-timestamp; default time.Now
}

// Intake is the webhook receiver: an http.Handler serving POST
// /hooks/{route}. See the package documentation for its durability rules
// and webhook_dedup.go for the deduplication protocol.
type Intake struct {
	opts IntakeOptions
	keys map[string][][]byte // HMAC keys of the Standard Webhooks routes

	mu       sync.Mutex
	closing  bool
	active   int
	idle     chan struct{}            // closed when closing and active reaches 0
	inflight map[string]chan struct{} // delivery key -> closed when its handler is done
}

// NewIntake checks opts and returns an Intake.
func NewIntake(opts IntakeOptions) (*Intake, error) {
	if opts.Store == nil || opts.Starter == nil || opts.Playbooks == nil {
		return nil, errors.New("webhook intake: Store, Starter and Playbooks are required")
	}
	keys := map[string][][]byte{}
	for name, r := range opts.Routes {
		if r.Secret == "" || slices.Contains(r.Secrets, "") {
			return nil, fmt.Errorf("webhook route %q: a secret is required", name)
		}
		switch r.Verify {
		case "", VerifyShared:
		case VerifyStandard:
			for i, s := range r.secrets() {
				k, err := StandardKey(s)
				if err != nil {
					return nil, fmt.Errorf("webhook route %q: secret %d: %w", name, i+1, err)
				}
				keys[name] = append(keys[name], k)
			}
		default:
			return nil, fmt.Errorf("webhook route %q: unknown verify mode %q (want one of %s)", name, r.Verify, strings.Join(VerifyModes, ", "))
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.DedupTTL <= 0 {
		opts.DedupTTL = DefaultDedupTTL
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Intake{opts: opts, keys: keys, inflight: map[string]chan struct{}{}}, nil
}

// Shutdown makes the intake answer 503 to new requests and waits until the
// requests being handled are answered (their deliveries committed) or ctx
// ends.
func (in *Intake) Shutdown(ctx context.Context) error {
	in.mu.Lock()
	in.closing = true
	if in.idle == nil {
		in.idle = make(chan struct{})
		if in.active == 0 {
			close(in.idle)
		}
	}
	idle := in.idle
	in.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("webhook intake shutdown: %w", ctx.Err())
	}
}

// enter registers a request; false once shutting down.
func (in *Intake) enter() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closing {
		return false
	}
	in.active++
	return true
}

// track registers work a request leaves behind (its done record), so
// that Shutdown waits for it; leave ends it.
func (in *Intake) track() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.active++
}

func (in *Intake) leave() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.active--
	if in.active == 0 && in.idle != nil {
		close(in.idle)
	}
}

// Answer is the body of a 200 answer.
type Answer struct {
	// Status is "accepted" (runs started, possibly none) or "duplicate"
	// (nothing started: the delivery was seen before, or every run it
	// asks for is for a hook an earlier delivery started it for).
	Status string `json:"status"`
	// Runs are the IDs of the runs of the delivery's units, in order: the
	// runs it started and, for a hook delivered before under another
	// hooksId, the run that delivery started. A duplicate delivery gets
	// the runs of its first answer.
	Runs []string `json:"runs"`
	// Skipped names playbooks that matched but whose `if` or inputs could
	// not be evaluated (a playbook defect; logged).
	Skipped []string `json:"skipped,omitempty"`
}

// ErrorBody is the body of every error answer.
type ErrorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"` // invalid, unauthorized, not_found, unavailable, internal
}

// ServeHTTP answers one delivery. The checks run in a fixed order: 404
// unknown route, 405 not POST, 503 shutting down, 415 not JSON, 401 bad or
// missing signature, 413 body too large, 400 malformed; then 200 once the
// delivery and its runs are committed, or 500 when the store or the
// Starter failed (nothing is marked done, so a redelivery completes it).
// On a Standard Webhooks route the headers and the timestamp are checked
// (401) before the body is read, its signature (401) after.
func (in *Intake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rep := reportOf(r.Context())
	name, ok := strings.CutPrefix(r.URL.Path, "/hooks/")
	route, known := in.opts.Routes[name]
	if !ok || !known {
		rep.refuse(w, http.StatusNotFound, "not_found", fmt.Sprintf("no webhook route %q", name))
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		rep.refuse(w, http.StatusMethodNotAllowed, "invalid", "webhooks are delivered with POST")
		return
	}
	if !in.enter() {
		rep.refuse(w, http.StatusServiceUnavailable, "unavailable", "shutting down; deliver again later")
		return
	}
	defer in.leave()
	if msg := checkContentType(r.Header.Get("Content-Type")); msg != "" {
		rep.refuse(w, http.StatusUnsupportedMediaType, "invalid", msg)
		return
	}
	standard := route.Verify == VerifyStandard
	var id, ts string
	msg := ""
	if standard {
		id, ts, msg = standardHeaders(r.Header, in.opts.Now())
	} else {
		msg = checkSignature(r.Header, route.secrets())
	}
	if msg != "" {
		rep.refuse(w, http.StatusUnauthorized, "unauthorized", msg)
		return
	}
	tooLarge := fmt.Sprintf("body is larger than %d bytes", in.opts.MaxBody)
	if r.ContentLength > in.opts.MaxBody {
		rep.refuse(w, http.StatusRequestEntityTooLarge, "invalid", tooLarge)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, in.opts.MaxBody+1))
	rep.Body = body
	if err != nil {
		rep.refuse(w, http.StatusBadRequest, "invalid", "reading the body failed: "+err.Error())
		return
	}
	if int64(len(body)) > in.opts.MaxBody {
		rep.refuse(w, http.StatusRequestEntityTooLarge, "invalid", tooLarge)
		return
	}
	var d *Delivery
	if standard {
		if !standardSignature(r.Header.Get("webhook-signature"), id, ts, body, in.keys[name]) {
			rep.refuse(w, http.StatusUnauthorized, "unauthorized", "no webhook-signature matches the route's secret")
			return
		}
		d, err = ParseGeneric(id, body)
	} else {
		d, err = ParseDelivery(body)
		rep.Delivery = d
	}
	if err != nil {
		rep.refuse(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	ans, err := in.deliver(r.Context(), name, d)
	if err != nil {
		in.opts.Logger.Error("webhook delivery failed", "route", name, "delivery", d.HooksID, "err", err)
		rep.refuse(w, http.StatusInternalServerError, "internal", "the delivery could not be committed; deliver again")
		return
	}
	rep.accept(w, ans)
}

// checkContentType accepts application/json (or a +json type) with no
// charset or UTF-8.
func checkContentType(ct string) string {
	if ct == "" {
		return "Content-Type is missing; send application/json;charset=UTF-8"
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return fmt.Sprintf("Content-Type %q is not JSON; send application/json;charset=UTF-8", ct)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return fmt.Sprintf("charset %q is not supported; send UTF-8", cs)
	}
	return ""
}

// checkSignature compares every signature header present with every
// secret in constant time (over SHA-256 digests, so the secrets' length
// does not leak either).
func checkSignature(h http.Header, secrets []string) string {
	found := false
	match := 0
	for _, name := range SignatureHeaders {
		for _, v := range h.Values(name) {
			found = true
			got := sha256.Sum256([]byte(v))
			for _, s := range secrets {
				want := sha256.Sum256([]byte(s))
				match |= subtle.ConstantTimeCompare(got[:], want[:])
			}
		}
	}
	switch {
	case !found:
		return "signature header is missing (" + SignatureHeaders[0] + ")"
	case match != 1:
		return "signature does not match the route's secret"
	}
	return ""
}
