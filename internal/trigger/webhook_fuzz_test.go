package trigger

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzIntake posts arbitrary headers and bodies: the intake never panics,
// answers one of its documented statuses with a JSON body, and starts runs
// only for a 200.
func FuzzIntake(f *testing.F) {
	f.Add("application/json;charset=UTF-8", "X-Cloud-Webhook-Signature", testSecret, string(unsubscribe("f-1", "01012345678")))
	f.Add("application/json", "X-Toast-Webhook-Signature", testSecret, string(envelopeJSON("f-2", "INTERNATIONAL_DELIVERY_RECEIPT", []any{map[string]any{"hookId": "f-2-h0", "dlrStatus": "DELIVERED"}})))
	f.Add("application/json", "X-Nhn-Webhook-Signature", testSecret, string(envelopeJSON("f-3", "MESSAGE_RESULT_UPDATE", []any{map[string]any{"hookId": "f-3-h0", "messageStatus": 7}})))
	f.Add("text/plain", "X-Cloud-Webhook-Signature", testSecret, "{}")
	f.Add("application/json", "X-Cloud-Webhook-Signature", "wrong", "{}")
	f.Add("application/json; charset=latin1", "", "", "")
	f.Add("application/json", "X-Cloud-Webhook-Signature", testSecret, `{"hooksId":"a","webhookConfigId":"c","productName":"SMS","appKey":"k","event":"UNSUBSCRIBE","hooks":[{"hookId":1}]}`)
	f.Add("application/json", "X-Cloud-Webhook-Signature", testSecret, `{"hooksId":"a","hooks":[[[[[[[[[[]]]]]]]]]]}`)
	f.Add("application/json", "X-Cloud-Webhook-Signature", testSecret, strings.Repeat("[", 5000))
	f.Add("application/vnd.api+json", "X-Cloud-Webhook-Signature", testSecret, `{"hooksId":"\u0000","webhookConfigId":"c","productName":"SMS","appKey":"k","event":"X","hooks":[{"hookId":"h","n":1e400}]}`)
	f.Add("application/json", "X-Cloud-Webhook-Signature", testSecret, `{"hooksId":"f-4","event":"UNSUBSCRIBE","hooks":[{"hookId":"f-4-h0"}],"extra":{"a":[1,2.5]}}`)
	envs := []*hookEnv{
		newHookEnv(f, 4096, perHookPlaybook, perDeliveryPlaybook),
		newHookEnv(f, 4096, perHookPlaybook, perDeliveryPlaybook), // one commit per delivery
	}
	allowed := map[int]bool{200: true, 400: true, 401: true, 413: true, 415: true}
	f.Fuzz(func(t *testing.T, contentType, sigName, sig, body string) {
		for _, e := range envs {
			req := httptest.NewRequest(http.MethodPost, "/hooks/sms", strings.NewReader(body))
			req.Header.Set("Content-Type", contentType)
			if sigName != "" && httpHeaderNameOK(sigName) {
				req.Header.Set(sigName, sig)
			}
			n := len(e.starter.started())
			w := httptest.NewRecorder()
			e.intake.ServeHTTP(w, req)
			if !allowed[w.Code] {
				t.Fatalf("status %d is not documented: %s", w.Code, w.Body)
			}
			if !strings.HasPrefix(w.Body.String(), "{") || w.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("answer is not JSON: %q", w.Body)
			}
			if w.Code != 200 && len(e.starter.started()) != n {
				t.Fatalf("a %d started runs", w.Code)
			}
		}
	})
}

func httpHeaderNameOK(s string) bool {
	for _, c := range s {
		if c <= ' ' || c >= 0x7f || strings.ContainsRune(`()<>@,;:\"/[]?={}`, c) {
			return false
		}
	}
	return true
}
