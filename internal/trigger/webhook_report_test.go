package trigger

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The intake fills the Report in its request's context with the body it
// read, the envelope it parsed and the answer it sent, which its callers
// read instead of parsing either again.
func TestTheIntakeReportsWhatItReadParsedAndAnswered(t *testing.T) {
	e := newHookEnv(t, 1<<20, perHookPlaybook)
	serve := func(signature string, body []byte) (*httptest.ResponseRecorder, *Report) {
		req := httptest.NewRequest(http.MethodPost, "/hooks/sms", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Cloud-Webhook-Signature", signature)
		ctx, rep := WithReport(req.Context())
		w := httptest.NewRecorder()
		e.intake.ServeHTTP(w, req.WithContext(ctx))
		return w, rep
	}

	body := unsubscribe("h-1", "+821012345678", "+821087654321")
	w, rep := serve(testSecret, body)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var sent Answer
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &sent))
	assert.Equal(t, sent, rep.Answer)
	assert.Len(t, rep.Answer.Runs, 2)
	assert.Equal(t, body, rep.Body)
	require.NotNil(t, rep.Delivery)
	assert.Equal(t, "h-1", rep.Delivery.HooksID)
	assert.Equal(t, "UNSUBSCRIBE", rep.Delivery.Event)
	assert.Len(t, rep.Delivery.Hooks, 2)

	w, rep = serve(testSecret, body)
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "duplicate", rep.Answer.Status)
	assert.Equal(t, sent.Runs, rep.Answer.Runs)

	w, rep = serve("forged", body)
	require.Equal(t, http.StatusUnauthorized, w.Code)
	var refused ErrorBody
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &refused))
	assert.Equal(t, refused, rep.Refused)
	assert.Equal(t, "unauthorized", rep.Refused.Code)
	assert.Nil(t, rep.Body, "refused before its body was read")
	assert.Nil(t, rep.Delivery)

	malformed := []byte(`{"hooksId":"h-2","event":"UNSUBSCRIBE","hooks":[{}]}`)
	w, rep = serve(testSecret, malformed)
	require.Equal(t, http.StatusBadRequest, w.Code)
	assert.Equal(t, malformed, rep.Body, "the body read, for its envelope as far as it goes")
	assert.Nil(t, rep.Delivery, "no envelope parsed")
	assert.Contains(t, rep.Refused.Error, "hookId")
}

func TestWithReportKeepsTheReportOfItsContext(t *testing.T) {
	ctx, rep := WithReport(context.Background())
	again, same := WithReport(ctx)
	assert.Same(t, rep, same)
	assert.Equal(t, ctx, again)
}
