package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEnvelopeOfReadsWhatTheHeadHolds(t *testing.T) {
	for _, tc := range []struct {
		name, body, id, event string
		hooks                 int
	}{
		{"an envelope", `{"hooksId":"h-1","event":"UNSUBSCRIBE","hooks":[{"hookId":"a"},{"hookId":"b"}]}`, "h-1", "UNSUBSCRIBE", 2},
		{"a Standard Webhooks body's type", `{"type":"invoice.paid","data":{"event":"nested"}}`, "", "invoice.paid", 0},
		{"event wins over type", `{"type":"t","event":"E"}`, "", "E", 0},
		{"a cut body keeps what came before the cut", `{"hooksId":"h-9","event":"X","hooks":[{"hookId":"a"`, "h-9", "X", 0},
		{"not an object", `[1,2]`, "", "", 0},
		{"values of the wrong type", `{"hooksId":7,"event":null,"hooks":{}}`, "", "", 0},
		{"keys after a long list of hooks", `{"event":"E","hooks":[` + strings.Repeat(`{"hookId":"k","recipientNo":"01012345678"},`, 2000) + `{}],"hooksId":"h-late"}`, "h-late", "E", 2001},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, event, hooks := envelopeOf([]byte(tc.body))
			assert.Equal(t, tc.id, id)
			assert.Equal(t, tc.event, event)
			assert.Equal(t, tc.hooks, hooks)
		})
	}
}

// BenchmarkEnvelopeOf is what recording a delivery the intake refused
// after reading its body adds to its handling (a delivery it parsed is
// recorded from its report).
func BenchmarkEnvelopeOf(b *testing.B) {
	for _, n := range []int{1, 1000} {
		hooks := make([]map[string]any, n)
		for i := range hooks {
			hooks[i] = map[string]any{"hookId": fmt.Sprint("k-", i), "recipientNo": "01012345678", "unsubscribeNo": "0808885555",
				"enterpriseName": "ACME", "createdDateTime": "2026-11-25T10:00:00.000+09:00"}
		}
		body, _ := json.Marshal(map[string]any{"hooksId": "h-1", "webhookConfigId": "cfg", "productName": "SMS", "appKey": "app",
			"event": "UNSUBSCRIBE", "hooks": hooks})
		head := body[:min(len(body), deliveryHead)]
		b.Run(fmt.Sprintf("%d hooks, %d bytes read", n, len(head)), func(b *testing.B) {
			for b.Loop() {
				if _, ev, _ := envelopeOf(head); !strings.HasPrefix(ev, "UNSUB") {
					b.Fatal(ev)
				}
			}
		})
	}
}
