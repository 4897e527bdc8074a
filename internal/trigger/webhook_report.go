package trigger

import (
	"context"
	"encoding/json"
	"net/http"
)

// Report is what the intake made of one request, so that whoever serves
// it can log, count and list it without parsing the request's body or
// the answer again: WithReport puts one in the request's context, and
// the intake fills it as it goes.
type Report struct {
	// Body is the body as the intake read it; nil when it answered
	// before reading it.
	Body []byte
	// Delivery is the envelope the intake parsed from Body: nil when it
	// parsed none, and for a Standard Webhooks body.
	Delivery *Delivery
	// Answer is the answer the intake sent with a 200, Refused the one
	// it sent with another status; zero until it answers.
	Answer  Answer
	Refused ErrorBody
}

type reportKey struct{}

// WithReport returns ctx with a Report for the intake to fill, and the
// report. When ctx has one already, it is kept and returned.
func WithReport(ctx context.Context) (context.Context, *Report) {
	if r, ok := ctx.Value(reportKey{}).(*Report); ok {
		return ctx, r
	}
	r := &Report{}
	return context.WithValue(ctx, reportKey{}, r), r
}

// reportOf returns the Report of ctx, or one that nobody reads.
func reportOf(ctx context.Context) *Report {
	if r, ok := ctx.Value(reportKey{}).(*Report); ok {
		return r
	}
	return &Report{}
}

// refuse answers status with an ErrorBody.
func (r *Report) refuse(w http.ResponseWriter, status int, code, msg string) {
	r.Refused = ErrorBody{Error: msg, Code: code}
	writeJSON(w, status, r.Refused)
}

// accept answers 200 with ans.
func (r *Report) accept(w http.ResponseWriter, ans *Answer) {
	r.Answer = *ans
	writeJSON(w, http.StatusOK, ans)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
